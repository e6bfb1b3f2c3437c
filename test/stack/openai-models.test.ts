/**
 * The official `openai` client against the local stack as kong.yml configures it: looking a
 * model up (`models.retrieve`, `GET /v1/models/{id}`) and asking for an adapter the replicas'
 * adapter folder does not hold.
 */
import OpenAI from 'openai';
import type { LocalStack } from '../../stack/stack';
import { startOpenAiStack } from './openai-stack';

const BASE = 'meta-llama/Llama-3.1-8B-Instruct';
let stack: LocalStack;
let client: OpenAI;

beforeAll(async () => {
  ({ stack, client } = await startOpenAiStack(() => undefined));
});

afterAll(async () => {
  await stack?.stop();
});

describe('models.retrieve through the gateway', () => {
  it('answers each model /v1/models lists with its card from that list', async () => {
    const listed = [];
    for await (const m of client.models.list()) listed.push(m);
    for (const id of [BASE, 'sql-lora', 'support-gguf']) {
      const card = await client.models.retrieve(id);
      // `created` is the time of the answer, as vLLM's cards have it: the rest is the listed card.
      expect({ ...card, created: 0 }).toEqual({ ...listed.find((m) => m.id === id), created: 0 });
      expect(card).toMatchObject({ id, object: 'model', owned_by: 'kong-lora-router' });
      expect(typeof card.created).toBe('number');
    }
  });

  it('answers an id it does not list with 404 in OpenAI format', async () => {
    const r = client.models.retrieve('nobody-lora');
    await expect(r).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(r).rejects.toMatchObject({
      status: 404,
      code: 'model_not_found',
      type: 'invalid_request_error',
      message: expect.stringContaining('The model `nobody-lora` does not exist.'),
    });
  });
});

describe('an adapter name the simulated adapter folder does not hold', () => {
  it("costs one load the replica refuses with vLLM's 404, and the client gets 404 model_not_found", async () => {
    const r = client.chat.completions.create({
      model: 'no-such-adapter',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 2,
    });
    await expect(r).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(r).rejects.toMatchObject({ status: 404, code: 'model_not_found' });
    const refused = stack.fleet!.replicas.flatMap((rep) =>
      rep.adapterLog().filter((e) => e.op === 'load' && e.name === 'no-such-adapter'),
    );
    expect(refused.map((e) => e.status)).toEqual([404]);
    // An adapter the folder holds, not listed in kong.yml (a templated name), still loads.
    const ok = await client.chat.completions.create({
      model: 'my-adapter',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 2,
    });
    expect(ok.model).toBe('my-adapter');
  });
});
