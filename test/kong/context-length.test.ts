/**
 * A request longer than the replicas' context, through the real plugin server. The router
 * refuses it up front (400 `context_length_exceeded`, which no client retries) exactly when
 * every replica that could serve its model reports a context and none has room; a replica that
 * could serve it but reports none (llama.cpp) gets it and answers for itself.
 */
import { waitFor } from '../../harness/wait';
import type { KongDriver } from '../../harness/kong/driver';
import { BASE, json, startWorld, usePluginServer, vllm } from './world';

let driver: KongDriver;
usePluginServer((_s, d) => {
  driver = d;
});

/** A completion whose prompt is `tokens` token ids: the router's estimate is exact. */
const completion = (model: string, tokens: number, maxTokens: number) => ({
  path: '/v1/completions',
  headers: { 'content-type': 'application/json' },
  body: Buffer.from(JSON.stringify({ model, prompt: Array(tokens).fill(7), max_tokens: maxTokens })),
});

describe('requests longer than the context', () => {
  let w: Awaited<ReturnType<typeof startWorld>> | undefined;
  afterEach(async () => {
    await w?.stop();
    w = undefined;
  });

  it('with a llama.cpp replica that reports no context: an on-demand adapter it cannot load is 400, the base model goes to it', async () => {
    w = await startWorld(
      driver,
      [vllm({ maxModelLen: 4096 }), vllm({ maxModelLen: 4096 }), { backend: 'llamacpp', maxModelLen: 16384 }],
      (u) => ({
        replicas: [{ url: u[0] }, { url: u[1] }, { url: u[2], backend: 'llamacpp' }],
        base_model: BASE,
        adapter_path_template: '/adapters/{name}',
        max_loaded_adapters: 2,
        decision_headers: true,
      }),
    );
    await waitFor(async () =>
      (await w!.statusJson()).replicas.every((r: { health: string }) => r.health === 'up'),
    );
    const adapter = await w.service.handle(completion('a', 5000, 10));
    expect(adapter.status).toBe(400);
    expect(json(adapter.body).error).toMatchObject({
      code: 'context_length_exceeded',
      type: 'invalid_request_error',
    });
    expect(json(adapter.body).error.message).toMatch(
      /^This model's maximum context length is 4096 tokens\. However, you requested about 5010 tokens/,
    );
    expect(adapter.headers['Retry-After']).toBeUndefined();
    expect(w.loads(0).length + w.loads(1).length).toBe(0);
    // The base model: the llama.cpp replica may have room (it does not say), so it decides.
    const base = await w.service.handle(completion(BASE, 5000, 10));
    expect([base.status, base.headers['X-Lora-Replica']]).toEqual([200, w.fleet.urls[2]]);
  });

  it('prompt + max_tokens equal to max_model_len is proxied; one token more is 400 and no replica sees it', async () => {
    w = await startWorld(driver, [vllm({ maxModelLen: 4096 })], (u) => ({
      replicas: [{ url: u[0] }],
      base_model: BASE,
    }));
    const fits = await w.service.handle(completion(BASE, 4000, 96));
    expect(fits.status).toBe(200);
    const served = w.fleet.replicas[0]!.engine.stats().promptTokensTotal;
    const over = await w.service.handle(completion(BASE, 4000, 97));
    expect([over.status, json(over.body).error.code]).toEqual([400, 'context_length_exceeded']);
    expect(json(over.body).error.message).toMatch(
      /you requested about 4097 tokens \(4000 in the messages, 97 in the completion\)/,
    );
    expect(w.fleet.replicas[0]!.engine.stats().promptTokensTotal).toBe(served);
  });
});
