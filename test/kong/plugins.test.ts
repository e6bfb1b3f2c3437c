import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { ConfigError } from '../../src/config/kong-schema';
import { waitFor } from '../../harness/wait';
import { KongDriver, KongRequest, PluginServerProcess } from '../../harness/kong/driver';
import { LLAMA_MAX_DEPTH } from '../../src/router/proxied-request';
import { packageVersion } from '../../src/version';
import {
  BASE,
  dumpPlugins,
  json,
  PLUGINS_DIR,
  onDemand,
  startPluginServer,
  startWorld,
  usePluginServer,
  vllm,
} from './world';

let server: PluginServerProcess;
let driver: KongDriver;
usePluginServer((s, d) => {
  server = s;
  driver = d;
});

/** One replica behind lora-router, after a key-auth stand-in that answers 401 while `refuse(true)`. */
async function behindKeyAuth(d: KongDriver) {
  let reject = false;
  const world = await startWorld(d, [vllm()], (u) => onDemand(u), {
    before: () =>
      reject
        ? { status: 401, body: Buffer.from('{"message":"No API key found in request"}'), headers: {} }
        : undefined,
  });
  return { world, refuse: (on: boolean) => void (reject = on) };
}

/** Runs `fn` against a plugin-server process of its own, stopped after. */
async function ownNode<T>(fn: (driver: KongDriver, server: PluginServerProcess) => Promise<T>): Promise<T> {
  const own = await startPluginServer();
  try {
    return await fn(own.driver, own.server);
  } finally {
    own.driver.close();
    await own.server.stop();
  }
}

describe('the build and the plugin server contract', () => {
  it('puts exactly the two plugin entry files in dist/plugins', () => {
    expect(readdirSync(PLUGINS_DIR).sort()).toEqual(['lora-poller.js', 'lora-router.js']);
  });

  it('--dump-all-plugins prints clean JSON for both and exits', () => {
    const info = dumpPlugins();
    expect(info.map((p) => p.Name).sort()).toEqual(['lora-poller', 'lora-router']);
    const router = info.find((p) => p.Name === 'lora-router')!;
    expect(router).toMatchObject({
      Version: packageVersion(),
      Priority: 900,
      Phases: expect.arrayContaining(['access', 'log']),
    });
    expect(router.Phases).not.toContain('response'); // it would make Kong buffer responses
    expect(JSON.stringify(router.Schema)).not.toMatch(/description/);
  });

  it('loads the plugins the way the server does, with no stray output', () => {
    const r = spawnSync(
      process.execPath,
      [PluginServerProcess.binary(), '-d', PLUGINS_DIR, '--dump-plugin-info', 'lora-router'],
      { timeout: 20_000 },
    );
    expect(r.status).toBe(0);
    expect(r.stderr.toString()).toBe('');
  });
});

describe('schema validation, as Kong applies the dumped schema', () => {
  const errs = async (config: Record<string, unknown>) => {
    try {
      await driver.startInstance('lora-router', config);
    } catch (e) {
      return Object.fromEntries((e as ConfigError).fieldErrors.map((f) => [f.field, f.message]));
    }
    return 'accepted';
  };
  it('refuses a missing url, a bad backend, a negative N', async () => {
    expect(await errs({ replicas: [{ backend: 'vllm' }] })).toEqual({
      'config.replicas[1].url': 'required field missing',
    });
    expect(await errs({ replicas: [{ url: 'http://a:1', backend: 'tgi' }] })).toEqual({
      'config.replicas[1].backend': 'expected one of: vllm, llamacpp',
    });
    expect(await errs({ replicas: [{ url: 'http://a:1' }], max_loaded_adapters: -1 })).toEqual({
      'config.max_loaded_adapters': 'value should be between 0 and 4096',
    });
    expect(await errs({ replicas: [{ url: 'http://a:1' }] })).toBe('accepted');
  });
});

describe('lora-router through the real plugin server', () => {
  let w: Awaited<ReturnType<typeof startWorld>>;
  afterEach(() => w?.stop());

  it('routes a resident adapter with at most 4 PDK calls in access and 2 in log, and shares the decision', async () => {
    w = await startWorld(
      driver,
      [vllm({ staticAdapters: [{ name: 'boot', path: '/adapters/boot' }] })],
      (u) => onDemand(u),
    );
    expect((await w.chat('boot')).status).toBe(200); // first request may refresh the snapshot
    const r = await w.chat('boot');
    expect(r.status).toBe(200);
    expect(json(r.body).model).toBe('boot');
    expect(r.kong.pdkCalls.access).toEqual([
      'kong.request.get_path',
      'kong.request.get_raw_body',
      'kong.ctx.shared.set',
      'kong.service.set_target',
    ]);
    expect(r.kong.pdkCalls.log).toEqual(['kong.ctx.shared.get', 'kong.response.get_status']);
    expect(r.kong.ctxShared.get('lora_router')).toMatchObject({
      replica: w.fleet.urls[0],
      stage: 'holder',
      adapter: 'boot',
    });
    expect((await w.statusJson()).inFlight).toBe(0);
  });

  it('adds X-Lora-Replica and X-Lora-Stage when decision_headers is on', async () => {
    w = await startWorld(driver, [vllm()], (u) => onDemand(u, { decision_headers: true }));
    const r = await w.chat('a');
    expect([r.headers['X-Lora-Replica'], r.headers['X-Lora-Stage']]).toEqual([w.fleet.urls[0], 'free']);
  });

  it('200 concurrent first requests for a cold adapter cause exactly one load', async () => {
    // What is tested is that concurrent cold requests share one load, so the holder stays the
    // holder. It never counts as saturated (count mode at 1000 waiting: with 2 waiting, or with the
    // default predicted mode, the burst queued on it, 16 running, saturates it), a poll has 5 s, not 500 ms (one poll past its timeout marks the
    // holder down), and its last poll counts as fresh for a minute, not 2 s (the other replica's
    // fresher one wins). Otherwise the requests decided after such a poll spread the adapter to
    // the other replica as the routing rule says: a second load, the more often the slower the
    // machine decides 200 requests.
    w = await startWorld(
      driver,
      [vllm(), vllm()],
      (u) =>
        onDemand(u, {
          max_loaded_adapters: 4,
          saturation_mode: 'count',
          target_waiting_per_replica: 1000,
          stale_after_ms: 60_000,
        }),
      {},
      50,
      5000,
    );
    const rs = await Promise.all(Array.from({ length: 200 }, () => w.chat('cold', 1)));
    expect(rs.map((r) => r.status)).toEqual(Array(200).fill(200));
    expect([...w.loads(0, 'cold'), ...w.loads(1, 'cold')]).toHaveLength(1);
    expect((await w.statusJson()).inFlight).toBe(0);
  });

  it('keeps an adapter on its holder (affinity) and spills when the holder saturates', async () => {
    w = await startWorld(
      driver,
      [vllm({ engine: { maxNumSeqs: 1 } }), vllm({ engine: { maxNumSeqs: 1 } })],
      // The count rule's thresholds (test/kong/predicted-ttft.test.ts covers the default).
      (u) => onDemand(u, { saturation_mode: 'count', target_waiting_per_replica: 2, picker: 'max-score' }),
    );
    const first = await w.chat('a');
    const holder = first.kong.ctxShared.get('lora_router') as { replica: string };
    for (let i = 0; i < 5; i++) {
      const r = await w.chat('a');
      expect((r.kong.ctxShared.get('lora_router') as { replica: string; stage: string }).replica).toBe(
        holder.replica,
      );
    }
    const hi = w.fleet.urls.indexOf(holder.replica);
    const jam = Array.from({ length: 3 }, () =>
      fetch(`${holder.replica}/v1/chat/completions`, {
        method: 'POST',
        body: JSON.stringify({ model: 'a', messages: [{ role: 'user', content: 'x' }], max_tokens: 400 }),
      }).catch(() => null),
    );
    await waitFor(() => w.fleet.replicas[hi]!.engine.stats().waiting >= 2);
    await waitFor(
      async () =>
        (await w.statusJson()).replicas.find((r: { url: string }) => r.url === holder.replica).saturation >=
        1,
      3000,
      'poll sees saturation',
    );
    const spilled = await w.chat('a');
    expect(spilled.kong.ctxShared.get('lora_router')).toMatchObject({
      replica: w.fleet.urls[1 - hi],
      stage: 'free',
    });
    expect(w.loads(1 - hi, 'a')).toHaveLength(1);
    w.fleet.replicas[hi]!.engine.reset();
    await Promise.all(jam);
  });

  it('unloads the least recently used idle adapter, never one in flight', async () => {
    w = await startWorld(driver, [vllm()], (u) => onDemand(u));
    await w.chat('a');
    await w.chat('b');
    const long = w.chat('a', 200); // a busy
    await waitFor(() => w.fleet.replicas[0]!.engine.inFlight('a') === 1);
    expect((await w.chat('c')).status).toBe(200); // must evict b (idle), although a is older
    expect((await long).status).toBe(200);
    const unloads = w.fleet.replicas[0]!.adapterLog().filter((e) => e.op === 'unload');
    expect(unloads.map((e) => [e.name, e.inFlight])).toEqual([['b', 0]]);
  });

  it('rewrites the body with the lora field for llama.cpp replicas holding the adapter', async () => {
    w = await startWorld(
      driver,
      [
        {
          backend: 'llamacpp',
          staticAdapters: [{ path: '/m/a.gguf' }, { path: '/m/sql.gguf' }],
          timeScale: 10,
        },
      ],
      (u) => ({
        replicas: [{ url: u[0], backend: 'llamacpp' }],
        base_model: BASE,
        adapters: [{ name: 'sql', path: '/m/sql.gguf', static: true }],
      }),
    );
    const r = await w.chat('sql', 2, { lora: [{ id: 0, scale: 1 }] });
    expect(r.status).toBe(200);
    // The client's own choice is replaced: every adapter the replica lists, scale 1 for this one.
    expect(JSON.parse(r.kong.serviceBody!).lora).toEqual([
      { id: 0, scale: 0 },
      { id: 1, scale: 1 },
    ]);
    expect(w.fleet.replicas[0]!.requestRecords().at(-1)!.adapter).toBe('/m/sql.gguf');
    const base = await w.chat(BASE);
    expect(JSON.parse(base.kong.serviceBody!).lora).toEqual([
      { id: 0, scale: 0 },
      { id: 1, scale: 0 },
    ]);
    expect(w.fleet.replicas[0]!.requestRecords().at(-1)!.adapter).toBeNull();
    // The client's bytes go as they came, the lora member added last: a seed past 2^53, a 1.0
    // (a chat template renders a tool schema's), integer-like keys out of order and escapes would
    // all change if parsed and serialised again. Its own lora stays and loses to the router's.
    const sent =
      '{"model":"sql","lora":[{"id":0,"scale":1}],"messages":[{"role":"user","content":"h\\u00e9 ü"}],' +
      '"max_tokens":2,"seed":12345678901234567890,"temperature":1.0,"logit_bias":{"50256":-100,"123":1.0}}\n';
    const raw = await w.service.handle({
      path: '/v1/chat/completions',
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(sent),
    });
    expect(raw.status).toBe(200);
    expect(raw.kong.serviceBody).toBe(
      sent.trimEnd().slice(0, -1) + ',"lora":[{"id":0,"scale":0},{"id":1,"scale":1}]}\n',
    );
    expect(w.fleet.replicas[0]!.requestRecords().at(-1)!.adapter).toBe('/m/sql.gguf');
    // Nested past LLAMA_MAX_DEPTH: refused before it reaches the replica, the lease given back.
    const served = w.fleet.replicas[0]!.requestRecords().length;
    const deep = await w.service.handle({
      path: '/v1/chat/completions',
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(`{"model":"sql","x":${'['.repeat(LLAMA_MAX_DEPTH)}${']'.repeat(LLAMA_MAX_DEPTH)}}`),
    });
    expect([deep.status, JSON.parse(deep.body.toString('utf8')).error.code]).toEqual([400, 'invalid_json']);
    expect(w.fleet.replicas[0]!.requestRecords()).toHaveLength(served);
    expect((await w.statusJson()).inFlight).toBe(0);
  });

  it('answers GET /v1/models itself with everything the fleet can serve', async () => {
    w = await startWorld(
      driver,
      [vllm({ staticAdapters: [{ name: 'boot', path: '/adapters/boot' }] }), vllm()],
      (u) => onDemand(u, { adapters: [{ name: 'listed', path: '/adapters/listed' }] }),
    );
    await w.chat('dyn');
    const r = await w.service.handle({ method: 'GET', path: '/v1/models' });
    expect(r.status).toBe(200);
    expect(json(r.body).data.map((m: { id: string }) => m.id)).toEqual([BASE, 'listed', 'boot', 'dyn']);
    expect(r.kong.pdkCalls.access!.at(-1)).toBe('kong.response.exit');
  });

  describe('error paths: OpenAI-format errors, no replica contacted', () => {
    it.each([
      ['admin path', '/v1/load_lora_adapter', '{"lora_name":"x","lora_path":"/etc"}', 403, 'forbidden'],
      ['admin path behind a prefix', '/llm//v1/unload_lora_adapter', '{"lora_name":"x"}', 403, 'forbidden'],
      ['llama.cpp adapter admin', '/lora-adapters', '[{"id":0,"scale":1}]', 403, 'forbidden'],
      ['simulator control', '/_sim/fault', '{"kind":"kill"}', 403, 'forbidden'],
      ['invalid JSON', '/v1/chat/completions', '{"model":', 400, 'invalid_json'],
      ['JSON array', '/v1/chat/completions', '[]', 400, 'invalid_json'],
      ['empty body', '/v1/chat/completions', '', 400, 'invalid_request'],
      ['model not a string', '/v1/chat/completions', '{"model":1}', 400, 'invalid_model'],
      ['no model', '/v1/chat/completions', '{"messages":[]}', 400, 'invalid_model'],
      ['traversal name', '/v1/chat/completions', '{"model":"../../etc/passwd"}', 400, 'invalid_model'],
    ])('%s', async (_what, path, body, status, code) => {
      w = await startWorld(driver, [vllm()], (u) => onDemand(u));
      const r = await w.service.handle({
        path,
        body: Buffer.from(body),
        headers: { 'content-type': 'application/json' },
      });
      expect(r.status).toBe(status);
      expect(r.headers['Content-Type']).toBe('application/json');
      expect(json(r.body).error).toMatchObject({
        code,
        type: expect.any(String),
        message: expect.any(String),
      });
      expect(w.fleet.replicas[0]!.requestRecords()).toEqual([]);
      expect(w.fleet.replicas[0]!.adapterLog()).toEqual([]);
    });

    it('unknown adapter: 404 model_not_found', async () => {
      w = await startWorld(driver, [vllm()], (u) => onDemand(u, { adapter_path_template: undefined }));
      const r = await w.chat('nope');
      expect([r.status, json(r.body).error]).toEqual([
        404,
        {
          message: 'The model `nope` does not exist.',
          type: 'invalid_request_error',
          code: 'model_not_found',
        },
      ]);
    });

    it('a body nginx spooled past the body buffer is read back; over max_body_bytes: 413', async () => {
      w = await startWorld(driver, [vllm()], (u) => onDemand(u, { max_body_bytes: 4096 }), {
        bodyBufferBytes: 2048,
      });
      const body = (n: number) => Buffer.from(JSON.stringify({ model: BASE, prompt: 'x'.repeat(n) }));
      const spooled = await w.service.handle({ path: '/v1/completions', body: body(3000) });
      expect(spooled.status).toBe(200);
      const big = await w.service.handle({
        path: '/v1/completions',
        body: body(5000),
        bodyBufferBytes: 8192,
      });
      expect([big.status, json(big.body).error.code]).toEqual([413, 'request_too_large']);
      expect(w.fleet.replicas[0]!.requestRecords()).toHaveLength(1);
    });
    it('load failure: 502 naming the adapter, then 503 with Retry-After while backing off', async () => {
      w = await startWorld(driver, [vllm()], (u) => onDemand(u, { backoff_base_ms: 30000 }));
      await w.fleet.replicas[0]!.fault({ kind: 'failLoads', count: 5 });
      const a = await w.chat('flaky');
      expect([a.status, json(a.body).error.code]).toEqual([502, 'adapter_load_failed']);
      expect(json(a.body).error.message).toMatch(/'flaky'/);
      const b = await w.chat('flaky');
      expect([b.status, json(b.body).error.code, b.headers['Retry-After']]).toEqual([
        503,
        'adapter_load_backoff',
        '30',
      ]);
      expect(w.loads(0, 'flaky')).toHaveLength(1);
    });

    it('no adapter slot free within queue_timeout_ms: 503 with Retry-After', async () => {
      w = await startWorld(driver, [vllm()], (u) =>
        onDemand(u, { max_loaded_adapters: 1, queue_timeout_ms: 200 }),
      );
      const long = w.chat('a', 300);
      await waitFor(() => w.fleet.replicas[0]!.engine.inFlight('a') === 1);
      const r = await w.chat('b');
      expect([r.status, json(r.body).error.code, r.headers['Retry-After']]).toEqual([
        503,
        'adapter_slots_busy',
        '1',
      ]);
      expect((await long).status).toBe(200);
      expect(w.fleet.replicas[0]!.adapterLog().filter((e) => e.op === 'unload')).toEqual([]);
    });

    it('a static adapter no replica holds: 503 no_replica', async () => {
      w = await startWorld(driver, [vllm()], (u) =>
        onDemand(u, { adapters: [{ name: 'ghost', path: '/x', static: true }] }),
      );
      const r = await w.chat('ghost');
      expect([r.status, json(r.body).error.code]).toEqual([503, 'no_replica']);
    });
  });

  it('releases in-flight counts exactly once, and only for requests it admitted', async () => {
    const keyAuth = await behindKeyAuth(driver);
    w = keyAuth.world;
    await w.chat('a');
    keyAuth.refuse(true);
    const refused = await w.chat('a');
    expect(refused.status).toBe(401);
    expect(refused.kong.pdkCalls.access).toBeUndefined(); // our access never ran
    expect(refused.kong.pdkCalls.log).toEqual(['kong.ctx.shared.get']); // log did, and stopped there
    keyAuth.refuse(false);
    const ok = await w.chat('a');
    // Its log phase gave the lease back once: a second release there would be reported.
    expect(ok.kong.logs.filter((l) => l.level === 'err')).toEqual([]);
    // The same log phase twice (Kong would not): the second releases nothing and says so.
    const again = new KongRequest({ path: '/v1/chat/completions' });
    for (const [k, v] of ok.kong.ctxShared) again.ctxShared.set(k, v);
    again.status = 200;
    await driver.handleEvent(w.service.instances[0]!.id, 'log', again);
    expect((await w.statusJson()).inFlight).toBe(0);
    expect(again.logs.map((l) => [l.level, String(l.args[0])])).toEqual([
      ['err', expect.stringMatching(/lease .* is not open/)],
    ]);
  });

  it('keeps per-replica and per-adapter in-flight counts exact after every path: served, refused, upstream error, config change', async () => {
    const keyAuth = await behindKeyAuth(driver);
    w = keyAuth.world;
    // Counts as the store holds them: the process total, the replica's, and each adapter's.
    const counts = async () => {
      const s = await w.statusJson();
      const r = s.replicas.find((x: { url: string }) => x.url === w.fleet.urls[0]);
      const byAdapter = Object.fromEntries(
        r.adapters.map((a: { name: string; inFlight: number }) => [a.name, a.inFlight]),
      );
      return { total: s.inFlight, replica: r.inFlight, a: byAdapter.a ?? 0, b: byAdapter.b ?? 0 };
    };
    // One request for 'a' stays in flight throughout: a double release would show against it.
    // It ends when this test ends it, not after its decode steps: 400 tokens (0.8 s at the
    // simulator's pace) ended before the refused request on an eighth of the machine
    // (Received total 0). 8,000 tokens take 16 s, and are cut short below.
    const long = w.chat('a', 8000);
    await waitFor(() => w.fleet.replicas[0]!.engine.inFlight('a') === 1);
    const [longId] = w.fleet.replicas[0]!.engine.inFlightIds('a');
    const one = { total: 1, replica: 1, a: 1, b: 0 };
    expect(await counts()).toEqual(one);
    expect((await w.chat('a')).status).toBe(200); // served, same adapter
    expect(await counts()).toEqual(one);
    expect((await w.chat('b')).status).toBe(200); // served, another adapter
    expect(await counts()).toEqual(one);
    keyAuth.refuse(true);
    expect((await w.chat('a')).status).toBe(401); // refused by an earlier plugin
    keyAuth.refuse(false);
    expect(await counts()).toEqual(one);
    expect((await w.chat('../x')).status).toBe(400); // refused by lora-router itself
    expect(await counts()).toEqual(one);
    const upstream = await w.chat('a', -1); // the replica answers 400
    expect([upstream.status, json(upstream.body).error.message]).toEqual([
      400,
      "'max_tokens' must be a positive integer.",
    ]);
    expect(await counts()).toEqual(one);
    await w.service.configure([
      { name: 'lora-router', config: onDemand(w.fleet.urls, { target_waiting_per_replica: 8 }) },
    ]);
    expect(await counts()).toEqual(one);
    expect((await w.chat('a')).status).toBe(200); // through the new instance
    expect(await counts()).toEqual(one);
    // Still decoding, then cut: the replica drops the connection (Kong's 502), and the instance
    // that was replaced gives the lease back.
    expect(w.fleet.replicas[0]!.engine.abort(longId!)).toBe(true);
    expect((await long).status).toBe(502);
    expect(await counts()).toEqual({ total: 0, replica: 0, a: 0, b: 0 });
  });

  // A 404 in the log phase: test/kong/upstream-404.test.ts.

  it('hands the upstream status to the store in the log phase: 5xx answers in a row take the replica out (passive health)', () =>
    // A plugin server of its own (a fresh Kong node): this test changes process-wide settings.
    ownNode(async (driver) => {
      w = await startWorld(
        driver,
        [vllm(), vllm()],
        (u) => onDemand(u, { stale_after_ms: 3_600_000, picker: 'max-score' }),
        {},
        600_000,
      );
      expect((await w.chat('a')).status).toBe(200);
      const polls = await w.pollsHoldingStill();
      const holder = w.loads(0, 'a').length === 1 ? 0 : 1;
      // Completions fail on the holder; its /metrics and /v1/models keep answering.
      await w.fleet.replicas[holder]!.fault({ kind: 'dead', on: true });
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) statuses.push((await w.chat('a')).status);
      expect(statuses).toEqual([500, 500, 500]);
      const s = await w.statusJson();
      expect(s.replicas.find((r: { url: string }) => r.url === w.fleet.urls[holder]).health).toBe('down');
      expect(s.poller.polls).toBe(polls); // no poll told it
      const next = await w.chat('a');
      expect(next.status).toBe(200);
      expect((next.kong.ctxShared.get('lora_router') as { replica: string }).replica).toBe(
        w.fleet.urls[1 - holder],
      );
    }));

  it('never counts static adapters against max_loaded_adapters: two resident at start, one slot still loads', () =>
    // A plugin server of its own (a fresh Kong node): this test changes process-wide settings.
    ownNode(async (driver) => {
      const statics = [
        { name: 'boot-1', path: '/adapters/boot-1' },
        { name: 'boot-2', path: '/adapters/boot-2' },
      ];
      w = await startWorld(driver, [vllm({ staticAdapters: statics })], (u) =>
        onDemand(u, {
          max_loaded_adapters: 1,
          queue_timeout_ms: 300,
          adapters: statics.map((a) => ({ ...a, static: true })),
        }),
      );
      const replica = w.fleet.replicas[0]!;
      // Both static adapters resident (the simulator's registry) and known to the router as static.
      expect(replica.registered()).toEqual(['boot-1', 'boot-2']);
      for (const name of ['boot-1', 'boot-2']) expect((await w.chat(name)).status).toBe(200);
      const view = async () =>
        (await w.statusJson()).replicas.find((x: { url: string }) => x.url === w.fleet.urls[0]).adapters;
      expect((await view()).map((a: { state: string }) => a.state)).toEqual(['static', 'static']);
      // The one runtime slot is free: 'a' loads without waiting, and 'b' then replaces it.
      expect((await w.chat('a')).status).toBe(200);
      expect((await w.chat('b')).status).toBe(200);
      expect(replica.adapterLog().map((e) => [e.op, e.name, e.status])).toEqual([
        ['load', 'a', 200],
        ['unload', 'a', 200],
        ['load', 'b', 200],
      ]);
      expect(replica.registered().sort()).toEqual(['b', 'boot-1', 'boot-2']);
    }));

  it('reclaims the lease of a request whose log phase Kong never runs (lease_max_age_ms), so its adapter may go', () =>
    // A plugin server of its own (a fresh Kong node): this test changes process-wide settings.
    ownNode(async (driver, server) => {
      w = await startWorld(driver, [vllm()], (u) =>
        onDemand(u, { max_loaded_adapters: 1, lease_max_age_ms: 1000, queue_timeout_ms: 5000 }),
      );
      expect((await w.chat('a')).status).toBe(200);
      // Kong runs the access phase, then never the log phase (a worker crash, a lost connection).
      const orphan = new KongRequest({
        path: '/v1/chat/completions',
        body: Buffer.from(JSON.stringify({ model: 'a', messages: [{ role: 'user', content: 'hi' }] })),
      });
      await driver.handleEvent(w.service.instances[0]!.id, 'access', orphan);
      expect(orphan.ctxShared.get('lora_router')).toMatchObject({ replica: w.fleet.urls[0], adapter: 'a' });
      const mine = async () =>
        (await w.statusJson()).replicas.find((x: { url: string }) => x.url === w.fleet.urls[0]);
      expect((await mine()).adapters).toEqual([expect.objectContaining({ name: 'a', inFlight: 1 })]);
      // 'b' needs the only slot: 'a' counts as busy until its lease is reclaimed, then goes.
      const b = await w.chat('b');
      expect(b.status).toBe(200);
      expect(w.fleet.replicas[0]!.adapterLog().map((e) => [e.op, e.name, e.status])).toEqual([
        ['load', 'a', 200],
        ['unload', 'a', 200],
        ['load', 'b', 200],
      ]);
      const s = await w.statusJson();
      expect(s.inFlight).toBe(0);
      expect((await mine()).inFlight).toBe(0);
      expect(
        s.events.some((e: { op: string; adapter: string }) => e.op === 'lease-expired' && e.adapter === 'a'),
      ).toBe(true);
      expect(server.log.some((l) => /reclaimed in-flight lease .*its log phase never came/.test(l))).toBe(
        true,
      );
    }));

  it('keeps fleet state across a config change (new instance, old one closed): no reload', async () => {
    w = await startWorld(driver, [vllm()], (u) => onDemand(u), { workers: 1 });
    await w.chat('a');
    const before = w.service.instances[0]!.id;
    await w.service.configure([
      { name: 'lora-router', config: onDemand(w.fleet.urls, { target_waiting_per_replica: 8 }) },
    ]);
    // Kong starts the new instance on the worker's next request, then closes the old one.
    expect((await w.chat('a')).status).toBe(200);
    expect(w.service.instances[0]!.id).not.toBe(before);
    await expect(driver.closeInstance(before)).rejects.toThrow(/no plugin instance/);
    expect(w.loads(0, 'a')).toHaveLength(1);
  });

  it('serves status JSON and Prometheus metrics on the lora-poller route', async () => {
    w = await startWorld(
      driver,
      [vllm(), { backend: 'llamacpp', staticAdapters: [{ path: 'x.gguf' }], timeScale: 10 }],
      (u) => ({
        ...onDemand([u[0]!]),
        replicas: [{ url: u[0] }, { url: u[1], backend: 'llamacpp' }],
      }),
    );
    await w.chat('a');
    const s = await w.statusJson();
    expect(s.replicas.map((r: { url: string }) => r.url)).toEqual(expect.arrayContaining(w.fleet.urls));
    const v = s.replicas.find((r: { url: string }) => r.url === w.fleet.urls[0]);
    expect(v).toMatchObject({
      backend: 'vllm',
      health: 'up',
      adapters: [{ name: 'a', state: 'loaded', inFlight: 0 }],
    });
    expect(s.replicas.find((r: { url: string }) => r.url === w.fleet.urls[1]).llamaAdapters).toEqual([
      { id: 0, path: 'x.gguf' },
    ]);
    expect(s.events.some((e: { op: string; adapter: string }) => e.op === 'load' && e.adapter === 'a')).toBe(
      true,
    );
    const m = await w.status.handle({ method: 'GET', path: '/lora/metrics' });
    const text = m.body.toString();
    expect(m.headers['Content-Type']).toMatch(/^text\/plain/);
    for (const name of [
      'lora_router_decisions_total',
      'lora_router_adapter_loads_total',
      'lora_router_adapter_load_duration_seconds_bucket',
      'lora_router_in_flight',
      'lora_router_replica_saturation',
      'lora_router_poll_errors_total',
      'lora_router_snapshot_age_seconds',
    ]) {
      expect(text).toContain(name);
    }
    expect(text).toMatch(/lora_router_adapter_loads_total\{result="ok"\} [1-9]/);
    const page = await w.status.handle({ method: 'GET', path: '/lora' });
    expect(page.headers['Content-Type']).toMatch(/^text\/html/);
    expect(page.body.toString()).toContain('"/lora/status"');
  });

  it('a PDK call that raises in Kong (a bad port to set_target): 500, the event never stepped again, the lease given back by log', async () => {
    w = await startWorld(driver, [vllm()], (u) => onDemand(u));
    const id = await w.service.node.workers[0]!.instanceId(w.service.configs[0]!);
    const req = new KongRequest({
      path: '/v1/chat/completions',
      body: Buffer.from(JSON.stringify({ model: BASE, messages: [] })),
    });
    const orig = req.pdk.bind(req);
    req.pdk = (m, a) => (m === 'kong.service.set_target' ? { raise: 'port must be an integer' } : orig(m, a));
    await driver.handleEvent(id, 'access', req);
    expect([req.exit?.status, req.luaErrors]).toEqual([
      500,
      ['kong.service.set_target: port must be an integer'],
    ]);
    expect(server.exited).toBe(false);
    // The lease was handed to ctx before set_target: the log phase returns it.
    await driver.handleEvent(id, 'log', req);
    expect((await w.statusJson()).inFlight).toBe(0);
  });
});

describe('lora-router without lora-poller in its process', () => {
  it('refreshes a replica itself on the first request instead of routing blind', async () => {
    const own = await startPluginServer(); // a process that never sees lora-poller
    const fleet = await (
      await import('../../sim/fleet')
    ).SimFleet.start([vllm(), vllm({ staticAdapters: [{ name: 'only-on-2', path: '/adapters/x' }] })]);
    try {
      const { LocalGateway } = await import('../../stack/gateway');
      const gw = await LocalGateway.create({
        driver: own.driver,
        plugins: [
          { name: 'lora-router', config: { replicas: fleet.urls.map((url) => ({ url })), base_model: BASE } },
        ],
        serviceUrl: fleet.urls[0]!,
      });
      // max_loaded_adapters 0: only a holder can serve it, and only a poll can tell which one is.
      const r = await gw.handle({
        path: '/v1/chat/completions',
        body: Buffer.from(
          JSON.stringify({ model: 'only-on-2', messages: [{ role: 'user', content: 'x' }], max_tokens: 1 }),
        ),
      });
      expect(r.status).toBe(200);
      expect(r.kong.ctxShared.get('lora_router')).toMatchObject({ replica: fleet.urls[1], stage: 'static' });
      expect(fleet.replicas[0]!.requestRecords()).toEqual([]);
      await gw.close();
    } finally {
      await fleet.stop();
      await own.server.stop();
    }
  });
});

describe('the local gateway', () => {
  it("falls back to the service's upstream, round robin, when no plugin sets a target", async () => {
    const fleet = await (await import('../../sim/fleet')).SimFleet.start([vllm(), vllm()]);
    try {
      const { LocalGateway } = await import('../../stack/gateway');
      const gw = await LocalGateway.create({
        driver,
        plugins: [],
        serviceUrl: 'http://127.0.0.1:9',
        upstreamTargets: fleet.urls,
      });
      for (let i = 0; i < 4; i++) {
        const r = await gw.handle({
          path: '/v1/completions',
          body: Buffer.from(JSON.stringify({ model: BASE, prompt: 'x', max_tokens: 1 })),
        });
        expect(r.status).toBe(200);
      }
      expect(fleet.replicas.map((r) => r.requestRecords().length)).toEqual([2, 2]);
      await gw.close();
    } finally {
      await fleet.stop();
    }
  });
});
