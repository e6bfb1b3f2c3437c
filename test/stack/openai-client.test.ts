/**
 * The official `openai` npm client against the local stack (real plugin server, simulated
 * replicas over loopback): what most users will call the gateway with.
 */
import OpenAI from 'openai';
import type { LocalStack } from '../../stack/stack';
import { startOpenAiStack, type Attempt } from './openai-stack';

const BASE = 'meta-llama/Llama-3.1-8B-Instruct';
let stack: LocalStack;
let client: OpenAI;
let attempts: Attempt[];

beforeAll(async () => {
  // kong.yml as a user writes it, narrowed so that a burst of cold adapters must be refused
  // (two vLLM replicas, one adapter slot each, a short wait for room) and with no path
  // template, so an unlisted adapter is 404.
  ({ stack, client, attempts } = await startOpenAiStack((router) => {
    router.replicas = (router.replicas as unknown[]).slice(0, 2);
    delete router.adapter_path_template;
    router.max_loaded_adapters = 1;
    router.queue_timeout_ms = 300;
  }));
});

afterAll(async () => {
  await stack?.stop();
});

describe('the official openai client', () => {
  it('chats with an on-demand adapter', async () => {
    const r = await client.chat.completions.create({
      model: 'sql-lora',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 4,
    });
    expect(r.model).toBe('sql-lora');
    expect(r.object).toBe('chat.completion');
    expect(typeof r.choices[0]!.message.content).toBe('string');
    expect(r.usage!.completion_tokens).toBeGreaterThan(0);
  });

  it('completes with the base model', async () => {
    const r = await client.completions.create({ model: BASE, prompt: 'Once upon a time', max_tokens: 4 });
    expect([r.object, r.model]).toEqual(['text_completion', BASE]);
    expect(r.choices[0]!.text.length).toBeGreaterThan(0);
  });

  it('streams a chat completion chunk by chunk', async () => {
    const stream = await client.chat.completions.create({
      model: 'sql-lora',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 6,
      stream: true,
    });
    let text = '';
    let chunks = 0;
    for await (const c of stream) {
      chunks++;
      expect(c.object).toBe('chat.completion.chunk');
      text += c.choices[0]?.delta?.content ?? '';
    }
    expect(chunks).toBeGreaterThan(2);
    expect(text.length).toBeGreaterThan(0);
  });

  it('embeds with an adapter', async () => {
    const r = await client.embeddings.create({ model: 'chat-lora', input: ['a', 'b'] });
    expect([r.model, r.data.length]).toEqual(['chat-lora', 2]);
  });

  it('surfaces an unknown adapter as NotFoundError and an empty model as BadRequestError', async () => {
    const missing = client.chat.completions.create({
      model: 'nobody-lora',
      messages: [{ role: 'user', content: 'hi' }],
    });
    await expect(missing).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(missing).rejects.toMatchObject({
      status: 404,
      code: 'model_not_found',
      type: 'invalid_request_error',
    });
    const bad = client.chat.completions.create({ model: '', messages: [{ role: 'user', content: 'hi' }] });
    await expect(bad).rejects.toBeInstanceOf(OpenAI.BadRequestError);
    await expect(bad).rejects.toMatchObject({ status: 400, code: 'invalid_model' });
  });

  it("retries the router's 503 after its Retry-After, so a burst of cold requests ends served", async () => {
    attempts.length = 0;
    // Six cold adapters at once on two one-slot replicas: most must wait for a slot, and past
    // queue_timeout_ms the router refuses them with 503 and Retry-After.
    const names = [
      'summarize-lora',
      'translate-fr',
      'translate-de',
      'code-review',
      'support-tone',
      'legal-extract',
    ];
    const burst = names.map((model) =>
      client.chat.completions.create(
        { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 },
        { maxRetries: 8 },
      ),
    );
    const done = await Promise.all(burst);
    expect(done.map((r) => r.model)).toEqual(names);
    const refused = attempts.filter((a) => a.status === 503);
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused) {
      expect(r.retryAfter).toMatch(/^\d+$/);
      // The client's next attempt for that model came no sooner than Retry-After said.
      const next = attempts.find((a) => a.model === r.model && a.at > r.at);
      expect(next).toBeDefined();
      expect(next!.at - r.at).toBeGreaterThanOrEqual(Number(r.retryAfter) * 1000 - 50);
    }
  }, 60_000);
});
