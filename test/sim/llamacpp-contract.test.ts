import { SimFleet } from '../../sim/fleet';
import { call, chat, get, post, sseEvents } from '../helpers/http';
import { waitFor } from '../../harness/wait';

describe('simulated llama.cpp replica, over HTTP', () => {
  let fleet: SimFleet;
  let url: string;

  beforeAll(async () => {
    fleet = await SimFleet.start([
      {
        backend: 'llamacpp',
        baseModel: 'llama-3.1-8b-q4',
        staticAdapters: [{ path: 'adapters/sql.gguf' }, { path: 'adapters/chat.gguf', scale: 0 }],
        timeScale: 20,
      },
    ]);
    url = fleet.urls[0]!;
  });
  afterAll(() => fleet.stop());

  it('lists the adapters loaded at start with ids and global scales', async () => {
    const r = await get(url, '/lora-adapters');
    // Newer builds add each adapter's GGUF task name and prompt prefix.
    expect(r.json()).toEqual([
      { id: 0, path: 'adapters/sql.gguf', scale: 1, task_name: '', prompt_prefix: '' },
      { id: 1, path: 'adapters/chat.gguf', scale: 0, task_name: '', prompt_prefix: '' },
    ]);
  });

  it('sets global scales with POST /lora-adapters; unlisted adapters go to 0', async () => {
    const r = await post(url, '/lora-adapters', [{ id: 1, scale: 0.5 }]);
    expect(r.status).toBe(200);
    expect((await get(url, '/lora-adapters')).json().map((a: { scale: number }) => a.scale)).toEqual([
      0, 0.5,
    ]);
    // An id the replica does not have is skipped, and unlisted adapters still go to 0 (since
    // llama.cpp PR #18263, b7516: parse_lora_request checks no id; construct_lora_list, b10573).
    const unknown = await post(url, '/lora-adapters', [
      { id: 7, scale: 1 },
      { id: 0, scale: 1 },
    ]);
    expect(unknown.status).toBe(200);
    expect((await get(url, '/lora-adapters')).json().map((a: { scale: number }) => a.scale)).toEqual([1, 0]);
  });

  it('selects the adapter with the per-request lora field and echoes model', async () => {
    const r = await post(
      url,
      '/v1/chat/completions',
      chat('whatever-the-client-sent', 2, { lora: [{ id: 1, scale: 1.0 }] }),
    );
    expect(r.status).toBe(200);
    expect(r.json().model).toBe('whatever-the-client-sent');
    expect(fleet.replicas[0]!.requestRecords().at(-1)!.adapter).toBe('adapters/chat.gguf');
    // An unknown id is skipped: the request runs with every adapter at 0 (b7516 and later).
    const unknown = await post(url, '/v1/chat/completions', chat('m', 2, { lora: [{ id: 9, scale: 1 }] }));
    expect(unknown.status).toBe(200);
    expect(fleet.replicas[0]!.requestRecords().at(-1)!.adapter).toBeNull();
    // A `lora` that is not a list: the schema's text, prefixed with the field (server-schema.cpp, b10573).
    const bad = await post(url, '/v1/chat/completions', chat('m', 2, { lora: { id: 0 } }));
    expect([bad.status, bad.json().error]).toEqual([
      400,
      {
        code: 400,
        message: "Field 'lora': Error: 'lora' must be an array of objects with 'id' and 'scale' fields",
        type: 'invalid_request_error',
      },
    ]);
  });

  it('streams with SSE and [DONE]', async () => {
    const r = await post(
      url,
      '/v1/chat/completions',
      chat('m', 2, { stream: true, lora: [{ id: 0, scale: 1 }] }),
    );
    const events = sseEvents(r.text);
    expect(events.at(-1)).toBe('[DONE]');
    expect(events.length).toBe(4);
  });

  it('has no runtime load routes', async () => {
    const r = await post(url, '/v1/load_lora_adapter', { lora_name: 'a', lora_path: 'b' });
    expect(r.status).toBe(404);
  });

  it('exposes llamacpp:* metrics', async () => {
    const text = (await get(url, '/metrics')).text;
    for (const m of [
      'prompt_tokens_total',
      'tokens_predicted_total',
      'n_decode_total',
      'n_busy_slots_per_decode',
      'requests_processing',
      'requests_deferred',
    ]) {
      expect(text).toMatch(new RegExp(`^llamacpp:${m} [0-9.]+$`, 'm'));
    }
    expect(text).not.toMatch(/kv_cache/);
  });

  it('reports deferred requests when every slot is busy, and /slots state', async () => {
    const small = await SimFleet.start([
      { backend: 'llamacpp', staticAdapters: [{ path: 'a.gguf' }], engine: { maxNumSeqs: 1 }, timeScale: 5 },
    ]);
    try {
      const u = small.urls[0]!;
      const pending = [
        post(u, '/v1/completions', { model: 'm', prompt: 'a', max_tokens: 20 }),
        post(u, '/v1/completions', { model: 'm', prompt: 'b', max_tokens: 2 }),
      ];
      await waitFor(() => small.replicas[0]!.engine.stats().waiting === 1);
      const text = (await get(u, '/metrics')).text;
      expect(text).toMatch(/^llamacpp:requests_processing 1$/m);
      expect(text).toMatch(/^llamacpp:requests_deferred 1$/m);
      expect((await get(u, '/slots')).json()).toEqual([{ id: 0, n_ctx: 8192, is_processing: true }]);
      await Promise.all(pending);
    } finally {
      await small.stop();
    }
  });

  it('answers /health 503 "Loading model" while starting, then 200 {"status":"ok"}', async () => {
    const f = await SimFleet.start([{ backend: 'llamacpp', startupMs: 150 }]);
    try {
      const u = f.urls[0]!;
      const r = await get(u, '/health');
      expect(r.status).toBe(503);
      expect(r.json()).toEqual({ error: { code: 503, message: 'Loading model', type: 'unavailable_error' } });
      expect((await post(u, '/v1/completions', { model: 'm', prompt: 'a' })).status).toBe(503);
      await waitFor(async () => (await get(u, '/health')).status === 200, 3000);
      expect((await get(u, '/health')).json()).toEqual({ status: 'ok' });
      expect((await call(u, '/v1/models')).json().data[0].owned_by).toBe('llamacpp');
    } finally {
      await f.stop();
    }
  });
});
