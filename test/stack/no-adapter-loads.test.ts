/**
 * `max_loaded_adapters: 0` with on-demand adapters configured: the router never loads one, so
 * a request for one that no replica holds can never be served. Said at start, answered with
 * an error the client need not retry, and not offered by `/v1/models`.
 */
import OpenAI from 'openai';
import type { LocalStack } from '../../stack/stack';
import { waitFor } from '../../harness/wait';
import { startOpenAiStack, type Attempt } from './openai-stack';

const BASE = 'meta-llama/Llama-3.1-8B-Instruct';
let stack: LocalStack;
let client: OpenAI;
let attempts: Attempt[];
const lines: string[] = [];

beforeAll(async () => {
  // kong.yml as a user writes it, with the adapter limit left at its default (0).
  ({ stack, client, attempts } = await startOpenAiStack(
    (router) => delete router.max_loaded_adapters,
    (line) => lines.push(line),
  ));
});

afterAll(async () => {
  await stack?.stop();
});

const warning = /max_loaded_adapters is 0: the router loads no adapter/;

describe('max_loaded_adapters unset with on-demand adapters', () => {
  it('is a warning in what `npm start` prints, before any request', () => {
    expect(lines.filter((l) => warning.test(l))).toHaveLength(1);
  });

  it('a request for a listed on-demand adapter gets 404 naming the setting, once (the SDK does not retry it), and no load', async () => {
    attempts.length = 0;
    const r = client.chat.completions.create({
      model: 'sql-lora',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 2,
    });
    await expect(r).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(r).rejects.toMatchObject({
      status: 404,
      code: 'adapter_loading_disabled',
      type: 'invalid_request_error',
    });
    await expect(r).rejects.toThrow(/max_loaded_adapters is 0/);
    expect(attempts.map((a) => [a.status, a.retryAfter])).toEqual([[404, null]]);
    expect(stack.loads()).toBe(0);
    // The plugin server says it too, in its own log (Kong's error.log), when the instance starts.
    await waitFor(
      () => lines.some((l) => l.startsWith('[plugin-server]') && warning.test(l)),
      5000,
      'the plugin server warned',
    );
  });

  it('/v1/models offers the base model and the start-up adapters, not the on-demand ones', async () => {
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    expect(ids).toContain(BASE);
    expect(ids).toContain('support-gguf');
    expect(ids).not.toContain('sql-lora');
  });

  it('the base model and a start-up adapter are still served', async () => {
    for (const model of [BASE, 'support-gguf']) {
      const r = await client.chat.completions.create({
        model,
        messages: [{ role: 'user', content: 'hi' }],
        max_tokens: 2,
      });
      expect(r.model).toBe(model);
    }
  });
});
