import { SimFleet } from '../../sim/fleet';
import { readVllmLoad } from '../../src/metrics/replica-load';
import { chat, get, post, sseEvents } from '../helpers/http';
import { waitFor } from '../../harness/wait';

const BASE = 'meta-llama/Llama-3.1-8B-Instruct';

describe('simulated vLLM replica, over HTTP', () => {
  let fleet: SimFleet;
  let url: string;
  let plainUrl: string;
  let flatUrl: string;

  beforeAll(async () => {
    const common = {
      adapterDirs: ['/adapters'],
      adapterPaths: { '/big/rank128': 128 },
      maxLoraRank: 64,
      timeScale: 20, // 800 ms modelled load = 40 ms real
      engine: { decodeMsPerStep: 20 },
    };
    fleet = await SimFleet.start([
      { ...common, staticAdapters: [{ name: 'sql-lora', path: '/adapters/sql-lora' }] },
      { ...common, runtimeLoading: false },
      { ...common, errorStyle: 'flat', deprecatedKvMetric: true },
    ]);
    [url, plainUrl, flatUrl] = fleet.urls as [string, string, string];
  });
  afterAll(() => fleet.stop());

  it('lists the base model card first, then one card per registered adapter', async () => {
    const r = await get(url, '/v1/models');
    expect(r.status).toBe(200);
    const body = r.json();
    expect(body.object).toBe('list');
    expect(body.data[0]).toMatchObject({ id: BASE, object: 'model', owned_by: 'vllm', parent: null });
    expect(body.data[1]).toMatchObject({
      id: 'sql-lora',
      root: '/adapters/sql-lora',
      parent: BASE,
      object: 'model',
    });
    expect(body.data).toHaveLength(2);
  });

  it('answers chat completions for the base model and an adapter, echoing the name, with usage', async () => {
    for (const model of [BASE, 'sql-lora']) {
      const r = await post(url, '/v1/chat/completions', chat(model, 3));
      expect(r.status).toBe(200);
      const b = r.json();
      expect(b).toMatchObject({ object: 'chat.completion', model });
      expect(b.choices[0].message.role).toBe('assistant');
      expect(b.choices[0].finish_reason).toBe('length');
      expect(b.usage.completion_tokens).toBe(3);
      expect(b.usage.total_tokens).toBe(b.usage.prompt_tokens + 3);
    }
  });

  it('answers /v1/completions', async () => {
    const r = await post(url, '/v1/completions', { model: 'sql-lora', prompt: 'SELECT', max_tokens: 2 });
    expect(r.status).toBe(200);
    expect(r.json()).toMatchObject({
      object: 'text_completion',
      model: 'sql-lora',
      usage: { completion_tokens: 2 },
    });
    expect(typeof r.json().choices[0].text).toBe('string');
  });

  it('streams chat completions as SSE: a role chunk, one chunk per token, usage, then [DONE]', async () => {
    const r = await post(
      url,
      '/v1/chat/completions',
      chat('sql-lora', 3, { stream: true, stream_options: { include_usage: true } }),
    );
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(r.text.endsWith('data: [DONE]\n\n')).toBe(true);
    const events = sseEvents(r.text);
    expect(events.at(-1)).toBe('[DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
    expect(chunks[0].choices[0].delta).toEqual({ role: 'assistant', content: '' });
    const tokens = chunks.filter((c) => c.choices.length && c.choices[0].delta.content);
    expect(tokens).toHaveLength(3);
    expect(tokens.map((c) => c.choices[0].finish_reason)).toEqual([null, null, 'length']);
    expect(chunks.every((c) => c.object === 'chat.completion.chunk' && c.model === 'sql-lora')).toBe(true);
    expect(chunks.at(-1).usage).toMatchObject({ completion_tokens: 3 });
  });

  it('streams /v1/completions without a usage chunk unless asked', async () => {
    const r = await post(url, '/v1/completions', { model: BASE, prompt: 'x', max_tokens: 2, stream: true });
    const events = sseEvents(r.text);
    expect(events).toHaveLength(3);
    expect(JSON.parse(events[0]!).object).toBe('text_completion');
  });

  it('answers an unknown model with 404 in vLLM error format', async () => {
    const r = await post(url, '/v1/chat/completions', chat('nope'));
    expect(r.status).toBe(404);
    expect(r.json()).toEqual({
      error: {
        message: 'The model `nope` does not exist.',
        type: 'NotFoundError',
        param: 'model',
        code: 404,
      },
    });
  });

  it('rejects invalid bodies with 400', async () => {
    expect((await post(url, '/v1/chat/completions', { model: BASE })).status).toBe(400);
    const r = await post(url, '/v1/chat/completions', chat(BASE, 9000));
    expect(r.status).toBe(400);
    expect(r.json().error.message).toMatch(/maximum context length is 8192 tokens/);
  });

  it('accepts priority without --scheduling-policy priority and serves first come first served (vLLM V1)', async () => {
    // V1 passes `priority` on whatever the policy (vllm/v1/engine/processor.py `process_inputs`,
    // v0.11.0 and v0.11.2); the fcfs queue never reads it (FCFSRequestQueue,
    // vllm/v1/core/sched/request_queue.py). V0's 400 "Got priority 1 but Priority scheduling is not
    // enabled." went with V0 (vLLM PRs #25025, #25033).
    const f = await SimFleet.start([{ timeScale: 10, engine: { maxNumSeqs: 1, prefillMsPerToken: 1 } }]);
    try {
      const u = f.urls[0]!;
      const engine = f.replicas[0]!.engine;
      const alone = await post(u, '/v1/chat/completions', { ...chat(BASE, 3), priority: 1 });
      expect(alone.status).toBe(200);
      const done: string[] = [];
      const send = (name: string, words: number, priority: number) =>
        post(u, '/v1/chat/completions', {
          ...chat(BASE, 3, { messages: [{ role: 'user', content: 'word '.repeat(words) }] }),
          priority,
        }).then((r) => {
          done.push(name);
          return r;
        });
      const jam = send('jam', 6000, 0);
      await waitFor(() => engine.stats().running === 1);
      const low = send('low', 1, 5);
      await waitFor(() => engine.stats().waiting === 1);
      const high = send('high', 1, -5);
      await waitFor(() => engine.stats().waiting === 2);
      for (const r of await Promise.all([jam, low, high])) expect(r.status).toBe(200);
      expect(done).toEqual(['jam', 'low', 'high']);
    } finally {
      await f.stop();
    }
  });

  it("answers an over-long prompt with v0.19.0's renderer text, with and without max_tokens", async () => {
    const f = await SimFleet.start([{ contextErrors: 'renderer' }]);
    try {
      const long = chat(BASE, 16, { messages: [{ role: 'user', content: 'x'.repeat(40000) }] });
      const r = await post(f.urls[0]!, '/v1/chat/completions', long);
      expect(r.status).toBe(400);
      // Newer vLLM checks the tokenized prompt against max_model_len - max_tokens, tokenizing at
      // most one token past it (TokenizeParams, vllm/renderers/params.py): 8192 - 16 + 1.
      expect(r.json().error).toMatchObject({
        type: 'BadRequestError',
        param: 'input_tokens',
        message:
          "This model's maximum context length is 8192 tokens. However, you requested 16 output tokens and your prompt contains at least 8177 input tokens, for a total of at least 8193 tokens. Please reduce the length of the input prompt or the number of requested output tokens.",
      });
      // A chat request without max_tokens is checked with 0 output tokens (ChatCompletionRequest
      // `build_tok_params`, vllm/entrypoints/openai/chat_completion/protocol.py, v0.19.0).
      const { max_tokens: _, ...bare } = long;
      const r0 = await post(f.urls[0]!, '/v1/chat/completions', bare);
      expect(r0.status).toBe(400);
      expect(r0.json().error.message).toBe(
        "This model's maximum context length is 8192 tokens. However, you requested 0 output tokens and your prompt contains at least 8193 input tokens, for a total of at least 8193 tokens. Please reduce the length of the input prompt or the number of requested output tokens.",
      );
    } finally {
      await f.stop();
    }
  });

  it('loads and unloads adapters with plain-text success bodies; the registry follows', async () => {
    const load = await post(url, '/v1/load_lora_adapter', {
      lora_name: 'chat-lora',
      lora_path: '/adapters/chat-lora',
    });
    expect(load.status).toBe(200);
    expect(load.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(load.text).toBe("Success: LoRA adapter 'chat-lora' added successfully.");
    expect((await get(url, '/v1/models')).json().data.map((m: { id: string }) => m.id)).toContain(
      'chat-lora',
    );
    expect((await post(url, '/v1/chat/completions', chat('chat-lora', 1))).status).toBe(200);
    const unload = await post(url, '/v1/unload_lora_adapter', { lora_name: 'chat-lora' });
    expect(unload.status).toBe(200);
    expect(unload.text).toBe("Success: LoRA adapter 'chat-lora' removed successfully.");
    expect((await post(url, '/v1/chat/completions', chat('chat-lora', 1))).status).toBe(404);
  });

  it('answers every load/unload error case with its status and body', async () => {
    const cases: [string, unknown, number, string, string][] = [
      [
        '/v1/load_lora_adapter',
        { lora_name: 'sql-lora', lora_path: '/adapters/sql-lora' },
        400,
        'InvalidUserInput',
        "The lora adapter 'sql-lora' has already been loaded.",
      ],
      [
        '/v1/load_lora_adapter',
        { lora_name: 'a', lora_path: '/bad' },
        404,
        'NotFoundError',
        // Released vLLM: the engine's failure comes back wrapped by the utility call.
        'Call to add_lora method failed: Loading lora a failed: No adapter found for /bad',
      ],
      [
        '/v1/load_lora_adapter',
        { lora_name: 'big', lora_path: '/big/rank128' },
        400,
        'BadRequestError',
        'Call to add_lora method failed: LoRA rank 128 is greater than max_lora_rank 64.',
      ],
      [
        '/v1/load_lora_adapter',
        { lora_name: '', lora_path: '/adapters/x' },
        400,
        'InvalidUserInput',
        "Both 'lora_name' and 'lora_path' must be provided.",
      ],
      [
        // A missing field fails FastAPI's validation before vLLM's own check.
        '/v1/load_lora_adapter',
        { lora_name: 'x' },
        400,
        'Bad Request',
        `[{'type': 'missing', 'loc': ('body', 'lora_path'), 'msg': 'Field required', 'input': {"lora_name":"x"}}]`,
      ],
      [
        '/v1/unload_lora_adapter',
        { lora_name: 'x' },
        404,
        'NotFoundError',
        "The lora adapter 'x' cannot be found.",
      ],
      [
        '/v1/unload_lora_adapter',
        {},
        400,
        'InvalidUserInput',
        "'lora_name' needs to be provided to unload a LoRA adapter.",
      ],
    ];
    for (const [path, body, status, type, message] of cases) {
      const r = await post(url, path, body);
      expect({ path, body, status: r.status, json: r.json() }).toEqual({
        path,
        body,
        status,
        json: { error: { message, type, param: null, code: status } },
      });
    }
  });

  it('uses the flat error format of releases before v0.10.1 when configured', async () => {
    const r = await post(flatUrl, '/v1/unload_lora_adapter', { lora_name: 'x' });
    expect(r.json()).toEqual({
      object: 'error',
      message: "The lora adapter 'x' cannot be found.",
      type: 'NotFoundError',
      param: null,
      code: 404,
    });
  });

  it('serialises two concurrent loads of one name: one 200, one 400 already loaded', async () => {
    const body = { lora_name: 'race', lora_path: '/adapters/race' };
    const rs = await Promise.all([
      post(url, '/v1/load_lora_adapter', body),
      post(url, '/v1/load_lora_adapter', body),
    ]);
    expect(rs.map((r) => r.status).sort()).toEqual([200, 400]);
    expect(rs.find((r) => r.status === 400)!.json().error.message).toMatch(/already been loaded/);
    const loads = fleet.replicas[0]!.adapterLog().filter((e) => e.name === 'race');
    expect(loads.map((e) => e.status)).toEqual([200, 400]);
    // The loser waited for the winner's load; the load took the modelled time of a rank-16
    // adapter (less up to two wall-clock timer ticks: 1 ms is 20 modelled ms at time scale 20).
    expect(loads[0]!.ms).toBeGreaterThanOrEqual(fleet.replicas[0]!.engine.loadTime(16) - 40);
  });

  it('has no runtime LoRA routes without VLLM_ALLOW_RUNTIME_LORA_UPDATING', async () => {
    for (const path of ['/v1/load_lora_adapter', '/v1/unload_lora_adapter']) {
      const r = await post(plainUrl, path, { lora_name: 'a', lora_path: '/adapters/a' });
      expect(r.status).toBe(404);
      expect(r.json()).toEqual({ detail: 'Not Found' });
    }
  });

  it('exposes Prometheus metrics with vLLM names, labels and a timestamp-valued lora_requests_info', async () => {
    const r = await get(url, '/metrics');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/plain/);
    const l = `{engine="0",model_name="${BASE}"}`;
    for (const name of [
      'vllm:num_requests_running',
      'vllm:num_requests_waiting',
      'vllm:kv_cache_usage_perc',
      'vllm:prefix_cache_queries_total',
      'vllm:prefix_cache_hits_total',
    ]) {
      expect(r.text).toMatch(new RegExp(`^${name}${escape(l)} \\d`, 'm'));
    }
    expect(r.text).toMatch(/^# TYPE vllm:time_to_first_token_seconds histogram$/m);
    expect(r.text).toMatch(
      /^vllm:time_to_first_token_seconds_bucket\{engine="0",le="\+Inf",model_name=".*"\} \d/m,
    );
    expect(r.text).toMatch(/^vllm:prefix_cache_queries_created\{.*\} \d\.\d+e\+09$/m);
    const info = r.text.match(
      /^vllm:lora_requests_info\{max_lora="4",running_lora_adapters="[^"]*",waiting_lora_adapters="[^"]*"\} (\S+)$/m,
    );
    expect(Number(info![1])).toBeGreaterThan(1.7e9);
    expect(r.text).not.toMatch(/gpu_cache_usage_perc/);
    expect((await get(flatUrl, '/metrics')).text).toMatch(/^vllm:gpu_cache_usage_perc\{/m);
  });

  it('exports the per-request prompt-token and prefill-time histograms the router learns its prefill rate from', async () => {
    // vLLM observes both at a request's finish (PrometheusStatLogger.record,
    // vllm/v1/metrics/loggers.py, vLLM v0.11.0): their sums describe the same requests.
    const before = readVllmLoad((await get(url, '/metrics')).text);
    const body = chat(BASE, 2, { messages: [{ role: 'user', content: 'x'.repeat(400) }] });
    expect((await post(url, '/v1/chat/completions', body)).status).toBe(200);
    const text = (await get(url, '/metrics')).text;
    expect(text).toMatch(/^# TYPE vllm:request_prompt_tokens histogram$/m);
    expect(text).toMatch(/^# TYPE vllm:request_prefill_time_seconds histogram$/m);
    const after = readVllmLoad(text);
    expect(after.finishedPromptTokens! - (before.finishedPromptTokens ?? 0)).toBeGreaterThanOrEqual(100);
    expect(after.prefillSeconds!).toBeGreaterThan(before.prefillSeconds ?? 0);
  });

  it("exports vllm:cache_config_info, whose num_gpu_blocks x block_size is the engine's KV capacity", async () => {
    // vLLM's log_metrics_info: an info gauge (value 1) with CacheConfig.metrics_info() as labels
    // (vllm/v1/metrics/loggers.py, vLLM v0.11.0). The router's KV wait needs the capacity.
    const text = (await get(url, '/metrics')).text;
    expect(text).toMatch(/^# TYPE vllm:cache_config_info gauge$/m);
    expect(readVllmLoad(text).kvCapacityTokens).toBe(fleet.replicas[0]!.engine.options.kvCapacityTokens);
  });

  it('exports the per-request generation-token and decode-time histograms the router learns its decode time from', async () => {
    const before = readVllmLoad((await get(url, '/metrics')).text);
    const body = chat(BASE, 3, { messages: [{ role: 'user', content: 'x'.repeat(400) }] });
    expect((await post(url, '/v1/chat/completions', body)).status).toBe(200);
    const text = (await get(url, '/metrics')).text;
    expect(text).toMatch(/^# TYPE vllm:request_generation_tokens histogram$/m);
    expect(text).toMatch(/^# TYPE vllm:request_decode_time_seconds histogram$/m);
    const after = readVllmLoad(text);
    expect(after.generationTokens! - (before.generationTokens ?? 0)).toBe(3);
    expect(after.finishedRequests! - (before.finishedRequests ?? 0)).toBe(1);
    expect(after.decodeSeconds!).toBeGreaterThan(before.decodeSeconds ?? 0);
  });

  it('adds a lora_requests_info series for each running/waiting set and never removes one', async () => {
    const replica = fleet.replicas[0]!;
    const before = (await get(url, '/metrics')).text.match(/^vllm:lora_requests_info/gm)!.length;
    const pending = post(url, '/v1/chat/completions', chat('sql-lora', 50));
    await waitFor(() => replica.engine.stats().running === 1);
    const during = (await get(url, '/metrics')).text;
    expect(during).toMatch(/running_lora_adapters="sql-lora",waiting_lora_adapters=""/);
    expect(during).toMatch(/^vllm:num_requests_running\{.*\} 1\.0$/m);
    expect((await pending).status).toBe(200);
    const after = (await get(url, '/metrics')).text;
    expect(after.match(/^vllm:lora_requests_info/gm)!.length).toBeGreaterThanOrEqual(before + 1);
    expect(after).toMatch(/running_lora_adapters="sql-lora"/);
  });

  it('answers /health with 200 and an empty body', async () => {
    const r = await get(url, '/health');
    expect([r.status, r.text]).toEqual([200, '']);
  });

  it('records each request with arrival, start, first token and end', async () => {
    await post(url, '/v1/chat/completions', chat('sql-lora', 2));
    const rec = fleet.replicas[0]!.requestRecords().at(-1)!;
    expect(rec.adapter).toBe('sql-lora');
    expect(rec.start).toBeGreaterThanOrEqual(rec.arrival);
    expect(rec.firstToken).toBeGreaterThan(rec.start!);
    expect(rec.end).toBeGreaterThanOrEqual(rec.firstToken!);
  });
  it('resolves unknown adapters from a directory on first request when the filesystem resolver is on', async () => {
    const f = await SimFleet.start([
      {
        adapterDirs: ['/adapters'],
        resolverDir: '/adapters',
        timeScale: 20,
        engine: { maxCpuLoras: 1, loadBaseMs: 500 },
      },
    ]);
    try {
      const u = f.urls[0]!;
      expect((await post(u, '/v1/chat/completions', chat('res-a', 1))).status).toBe(200);
      expect((await post(u, '/v1/chat/completions', chat('res-b', 1))).status).toBe(200);
      expect((await get(u, '/v1/models')).json().data.map((m: { id: string }) => m.id)).toEqual([
        BASE,
        'res-a',
        'res-b',
      ]);
      // Loaded eagerly on first request (two loads, b's pushing a out of the one host slot);
      // registered (unbounded), so a's next request reloads it inside the engine loop.
      expect(f.replicas[0]!.engine.stats()).toMatchObject({ cacheMissLoads: 0, cacheEvictions: 1 });
      expect((await post(u, '/v1/chat/completions', chat('res-a', 1))).status).toBe(200);
      expect(f.replicas[0]!.engine.stats()).toMatchObject({ cacheMissLoads: 1, cacheEvictions: 2 });
      expect((await post(u, '/v1/chat/completions', chat('bad/name', 1))).status).toBe(404);
    } finally {
      await f.stop();
    }
  });
  it('keeps a request waiting when its adapter would exceed max_loras, while others pass it (over HTTP)', async () => {
    const f = await SimFleet.start([
      {
        staticAdapters: [
          { name: 'a', path: '/adapters/a' },
          { name: 'b', path: '/adapters/b' },
        ],
        timeScale: 10,
        engine: { maxLoras: 1, maxNumSeqs: 8 },
      },
    ]);
    try {
      const u = f.urls[0]!;
      const e = f.replicas[0]!.engine;
      const long = post(u, '/v1/chat/completions', chat('a', 200));
      await waitFor(() => e.stats().running === 1);
      const blocked = post(u, '/v1/chat/completions', chat('b', 1));
      await waitFor(() => e.stats().waiting === 1);
      // Slots are free, yet b waits: one adapter fills the batch. The base model and a pass.
      expect((await post(u, '/v1/chat/completions', chat(BASE, 1))).status).toBe(200);
      expect((await post(u, '/v1/chat/completions', chat('a', 1))).status).toBe(200);
      expect(e.stats()).toMatchObject({ waitingAdapters: ['b'], runningAdapters: ['a'] });
      const metrics = (await get(u, '/metrics')).text;
      expect(metrics).toMatch(/running_lora_adapters="a",waiting_lora_adapters="b"/);
      // b has no LoRA slot, yet vLLM counts it as waiting in every release: older schedulers put
      // the skipped requests back in the queue before make_stats reads its length, since PR
      // #38435 the gauge adds num_skipped_waiting_reqs (vllm/v1/metrics/loggers.py).
      expect(metrics).toMatch(/^vllm:num_requests_waiting\{.*\} 1\.0$/m);
      expect(readVllmLoad(metrics).waiting).toBe(1);
      await Promise.all([long, blocked]);
      const rec = f.replicas[0]!.requestRecords().find((r) => r.adapter === 'b')!;
      expect(rec.start).toBeGreaterThan(
        f.replicas[0]!.requestRecords().find((r) => r.adapter === 'a' && r.outputTokens === 200)!.end! - 1,
      );
    } finally {
      await f.stop();
    }
  });
});

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

describe('simulated vLLM adapter folder with the adapters it holds named', () => {
  let fleet: SimFleet;
  afterAll(() => fleet?.stop());

  it('loads the names it holds; any other path under it is vLLM\'s 404 "No adapter found"', async () => {
    fleet = await SimFleet.start([{ adapterDirs: ['/adapters'], adapterDirHolds: /^held$/, timeScale: 20 }]);
    const url = fleet.urls[0]!;
    const held = await post(url, '/v1/load_lora_adapter', { lora_name: 'held', lora_path: '/adapters/held' });
    expect(held.status).toBe(200);
    const missing = await post(url, '/v1/load_lora_adapter', {
      lora_name: 'missing',
      lora_path: '/adapters/missing',
    });
    expect([missing.status, missing.json()]).toEqual([
      404,
      {
        error: {
          message:
            'Call to add_lora method failed: Loading lora missing failed: No adapter found for /adapters/missing',
          type: 'NotFoundError',
          param: null,
          code: 404,
        },
      },
    ]);
  });
});
