/**
 * Defects a real Kong deployment meets, shown through the real plugin server driven as Kong's
 * Lua code drives it (driver.ts: several workers, lazy instances, fix_raw, Lua errors).
 */
import { LocalGateway } from '../../stack/gateway';
import { KongDriver, KongRequest, PluginServerProcess } from '../../harness/kong/driver';
import { waitFor } from '../../harness/wait';
import { BASE, json, onDemand, PLUGINS_DIR, startPluginServer, startWorld, vllm } from './world';

const chatBody = (model: string, extra: Record<string, unknown> = {}) =>
  Buffer.from(
    JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, ...extra }),
  );

let server: PluginServerProcess;
let driver: KongDriver;
beforeAll(async () => {
  server = await PluginServerProcess.start({ pluginsDir: PLUGINS_DIR });
  driver = new KongDriver(server.socketPath);
});
afterAll(async () => {
  driver.close();
  await server.stop();
});

type World = Awaited<ReturnType<typeof startWorld>>;
let w: World | undefined;
afterEach(async () => {
  await w?.stop();
  w = undefined;
});

describe('1. a body nginx spooled to a file (past client_body_buffer_size)', () => {
  it('is read with get_raw_body(max_body_bytes) and routed; a larger one gets a clear 413', async () => {
    w = await startWorld(driver, [vllm()], (u) => onDemand(u, { max_body_bytes: 16384 }), {
      bodyBufferBytes: 8192,
    });
    const pad = (n: number) => chatBody(BASE, { user: 'x'.repeat(n) });
    const spooled = await w.service.handle({ path: '/v1/chat/completions', body: pad(9000) });
    expect([spooled.status, spooled.kong.luaErrors]).toEqual([200, []]);
    expect(spooled.kong.pdkCalls.access).toContain('kong.request.get_raw_body');
    expect(w.fleet.replicas[0]!.requestRecords()).toHaveLength(1);
    // In memory but over max_body_bytes: the plugin's own 413.
    const big = await w.service.handle({
      path: '/v1/chat/completions',
      body: pad(20000),
      bodyBufferBytes: 1 << 20,
    });
    expect([big.status, json(big.body).error.code]).toEqual([413, 'request_too_large']);
    expect(w.fleet.replicas[0]!.requestRecords()).toHaveLength(1);
  });
});

describe('4. a plugin entity with an instance_name (Kong adds plugin_instance_name)', () => {
  it('both plugins accept every key Kong adds', async () => {
    w = await startWorld(driver, [vllm()], (u) => onDemand(u));
    await w.service.configure([
      {
        name: 'lora-router',
        config: onDemand(w.fleet.urls),
        instanceName: 'llm-router',
        keys: { route_id: 'r1' },
      },
    ]);
    await w.status.configure([
      {
        name: 'lora-poller',
        config: { poll_interval_ms: 50 },
        instanceName: 'llm-status',
        keys: { service_id: 's1' },
      },
    ]);
    expect(w.service.configs[0]!.conf).toMatchObject({ plugin_instance_name: 'llm-router', route_id: 'r1' });
    const r = await w.chat(BASE);
    expect([r.status, r.kong.luaErrors]).toEqual([200, []]);
    const s = await w.status.handle({ method: 'GET', path: '/lora/status' });
    expect([s.status, s.kong.luaErrors]).toEqual([200, []]);
  });
});

describe('8. lora-poller on every route of a service (or globally)', () => {
  it('answers only its own paths under base_path and passes everything else through with one PDK call', async () => {
    w = await startWorld(driver, [vllm()], (u) => onDemand(u));
    const both = await LocalGateway.create({
      driver,
      node: w.service.node,
      plugins: [
        { name: 'lora-router', config: onDemand(w.fleet.urls) },
        { name: 'lora-poller', config: { poll_interval_ms: 50, base_path: '/ops/lora' } },
      ],
      serviceUrl: w.fleet.urls[0]!,
    });
    try {
      const llm = await both.handle({ path: '/v1/chat/completions', body: chatBody(BASE) });
      expect(llm.status).toBe(200);
      expect(llm.kong.ctxShared.get('lora_router')).toBeDefined();
      const poller = llm.kong.pdkCalls.access!.filter((m) => m === 'kong.request.get_path');
      expect(poller).toHaveLength(2); // one for each plugin: the poller made no other call
      const page = await both.handle({ method: 'GET', path: '/ops/lora' });
      expect([page.status, page.headers['Content-Type']]).toEqual([200, 'text/html; charset=utf-8']);
      const status = await both.handle({ method: 'GET', path: '/ops/lora/status' });
      expect(json(status.body).inFlight).toBe(0);
      const metrics = await both.handle({ method: 'GET', path: '/ops/lora/metrics' });
      expect(metrics.body.toString()).toContain('lora_router_');
    } finally {
      await both.close();
    }
  });
});

describe('8b. lora-poller answers only under its base path, segment by segment', () => {
  it('/lora answers /lora, /lora/ and /lora/status, and passes /loraX, /lora-status and /lora.json through', async () => {
    w = await startWorld(driver, [vllm()], (u) => onDemand(u));
    // The poller in front of a replica: whatever it passes on reaches the replica (404 there).
    const front = await LocalGateway.create({
      driver,
      node: w.service.node,
      plugins: [{ name: 'lora-poller', config: { poll_interval_ms: 50 } }],
      serviceUrl: w.fleet.urls[0]!,
    });
    try {
      for (const path of ['/lora', '/lora/', '/lora/status']) {
        const r = await front.handle({ method: 'GET', path });
        expect([path, r.status, r.kong.exit]).toEqual([path, 200, expect.anything()]);
      }
      for (const path of ['/loraX', '/lora-status', '/lora.json', '/lorastatus/status']) {
        const r = await front.handle({ method: 'GET', path });
        // Not answered by the poller (no exit; one PDK call), but by the replica behind it.
        expect([path, r.kong.exit, r.kong.pdkCalls.access]).toEqual([
          path,
          undefined,
          ['kong.request.get_path'],
        ]);
        expect([path, r.status, json(r.body)]).toEqual([path, 404, { detail: 'Not Found' }]);
      }
    } finally {
      await front.close();
    }
  });
});

describe('6. instance ids after a plugin-server restart', () => {
  it("a worker's cached id never runs the other plugin's instance", async () => {
    const own = await PluginServerProcess.start({ pluginsDir: PLUGINS_DIR });
    let current = own;
    const d = new KongDriver(own.socketPath);
    w = await startWorld(d, [vllm()], (u) => onDemand(u), { workers: 2 });
    try {
      // One node: the router's route and the status route share its two workers.
      const status = await LocalGateway.create({
        driver: d,
        node: w.service.node,
        plugins: [{ name: 'lora-poller', config: { poll_interval_ms: 50 } }],
        serviceUrl: 'http://127.0.0.1:9',
      });
      const [w0, w1] = w.service.node.workers;
      const run = async (worker: typeof w0, gw: LocalGateway, req: KongRequest) => {
        for (const p of gw.configs) {
          await worker!.run(p, 'access', req);
          if (req.exit) break;
        }
        return req;
      };
      const llm = () => new KongRequest({ path: '/v1/chat/completions', body: chatBody(BASE) });
      expect((await run(w0, w.service, llm())).target).toBeDefined(); // worker 0 caches the router's id
      current = await own.restart();
      // Worker 1 opens the status page first: the new process gives lora-poller the first id.
      const page = await run(w1, status, new KongRequest({ method: 'GET', path: '/lora/status' }));
      expect(page.exit?.status).toBe(200);
      const again = await run(w0, w.service, llm());
      expect(again.exit?.body.toString() ?? '').not.toContain('inFlight');
      expect(again.target).toBeDefined();
      await status.close();
    } finally {
      d.close();
      await current.stop();
    }
  });
});

describe('10. waits Kong cannot honour', () => {
  it("refuses waits that could outlast Kong's 60 s RPC timeout, naming the fields", async () => {
    // Past a field's own bound: Kong refuses the config.
    await expect(
      startWorld(driver, [vllm()], (u) => onDemand(u, { load_timeout_ms: 50000 })),
    ).rejects.toThrow(/config.load_timeout_ms: value should be between/);
    // Each within bounds, the sum not: every request answers 500 naming them, logged through kong.log.
    w = await startWorld(driver, [vllm()], (u) =>
      onDemand(u, { load_timeout_ms: 25000, queue_timeout_ms: 20000 }),
    );
    const r = await w.chat(BASE);
    expect(r.status).toBe(500);
    expect(json(r.body).error.message).toMatch(/queue_timeout_ms.*load_timeout_ms/);
    expect(r.kong.logs.some((l) => l.level === 'err' && /load_timeout_ms/.test(String(l.args)))).toBe(true);
  });
});

describe("9. rare operational events reach Kong's error log", () => {
  it('a load failure is logged through kong.log on the request that met it', async () => {
    w = await startWorld(driver, [vllm()], (u) => onDemand(u));
    await w.fleet.replicas[0]!.fault({ kind: 'failLoads', count: 5 });
    const r = await w.chat('flaky');
    expect(r.status).toBe(502);
    expect(r.kong.logs.some((l) => ['err', 'warn'].includes(l.level) && /flaky/.test(String(l.args)))).toBe(
      true,
    );
    const ok = await w.chat(BASE);
    expect(ok.kong.pdkCalls.access!.filter((m) => m.startsWith('kong.log.'))).toEqual([]);
  });
});

describe('3. streams through Kong', () => {
  const stream = async (responseBuffering: boolean | undefined) => {
    w = await startWorld(driver, [vllm()], (u) => onDemand(u), { responseBuffering });
    const chunks: string[] = [];
    const r = await w.service.handle(
      { path: '/v1/chat/completions', body: chatBody(BASE, { stream: true, max_tokens: 6 }) },
      (c) => chunks.push(c),
    );
    expect(r.status).toBe(200);
    expect(r.body.toString()).toContain('data: [DONE]');
    await w.stop();
    w = undefined;
    return chunks.length;
  };

  it("arrive in one batch on a route with response_buffering on (Kong's default), chunk by chunk when off", async () => {
    expect(await stream(undefined)).toBe(1);
    expect(await stream(false)).toBeGreaterThan(3);
  });

  it("kong.yml's OpenAI route turns buffering off, and the local stack honours it", async () => {
    const { readKongYaml } = await import('../../stack/kong-config');
    const fleet = readKongYaml(`${__dirname}/../../kong.yml`).find((s) => s.name === 'llm-fleet')!;
    expect(fleet.responseBuffering('/v1/chat/completions')).toBe(false);
    expect(fleet.responseBuffering('/lora/status')).toBe(true);
  });
});

describe('11. a log phase Kong skipped (its timer could not start)', () => {
  it('the lease expires by age, counted in the metrics and on the status page', async () => {
    // A plugin server of its own (a fresh Kong node): leases are reclaimed past the longest
    // lease_max_age_ms any configuration in the process registered.
    const own = await startPluginServer();
    let skip = true;
    try {
      w = await startWorld(own.driver, [vllm()], (u) => onDemand(u, { lease_max_age_ms: 1000 }), {
        logTimerStarts: () => !skip,
      });
      const r = await w.chat(BASE);
      expect(r.status).toBe(200);
      expect((await w.statusJson()).inFlight).toBe(1); // no log phase: the lease stays
      skip = false;
      await waitFor(async () => (await w!.statusJson()).inFlight === 0, 10_000);
      expect((await w.statusJson()).poller.leasesExpired).toBe(1);
      const metrics = await w.status.handle({ method: 'GET', path: '/lora/metrics' });
      expect(metrics.body.toString()).toMatch(/^lora_router_leases_expired_total 1$/m);
    } finally {
      await w?.stop();
      w = undefined;
      own.driver.close();
      await own.server.stop();
    }
  });
});

describe('12. config reloads under load (log phases with the old __seq__)', () => {
  it('releases every lease exactly once, across two workers and five reloads', async () => {
    w = await startWorld(driver, [vllm({ timeScale: 2 }), vllm({ timeScale: 2 })], (u) => onDemand(u), {
      workers: 2,
    });
    const timersBefore = (await w.statusJson()).process.timers;
    const inflight: ReturnType<World['chat']>[] = [];
    for (let reload = 0; reload < 5; reload++) {
      for (let i = 0; i < 8; i++) inflight.push(w.chat(i % 2 ? 'a' : BASE, 20));
      await new Promise((r) => setTimeout(r, 30));
      // A new __seq__ for the same plugin: requests already past access log with the old one.
      await w.service.configure([
        { name: 'lora-router', config: onDemand(w.fleet.urls, { target_waiting_per_replica: 4 + reload }) },
      ]);
    }
    const replies = await Promise.all(inflight);
    // On a failure, what each replica's engine did (its adapter log) says why.
    expect({
      failed: replies.filter((r) => r.status !== 200).map((r) => `${r.status} ${r.body.toString()}`),
      logs: w.fleet.replicas.map((r) => r.adapterLog()),
    }).toEqual({ failed: [], logs: expect.anything() });
    const s = await w.statusJson();
    expect(s.inFlight).toBe(0);
    expect(
      s.replicas.flatMap((r: { adapters: { inFlight: number }[] }) => r.adapters.map((a) => a.inFlight)),
    ).toEqual(s.replicas.flatMap((r: { adapters: unknown[] }) => r.adapters.map(() => 0)));
    // Old-config instances Kong restarted for those log phases hold no timer of their own.
    expect(s.process.timers).toBeLessThanOrEqual(timersBefore + 2);
    // Each worker holds one instance of the current config, no more.
    await w.chat(BASE);
    await w.chat(BASE);
    expect(w.service.instances.map((i) => i.worker).sort()).toEqual([0, 1]);
  });
});

describe('2. an https:// replica', () => {
  it('is reached over TLS: set_scheme("https") after set_target (http replicas: no extra call, see plugins.test.ts)', async () => {
    const { execFileSync } = await import('node:child_process');
    const { mkdtempSync, readFileSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const https = await import('node:https');
    const http = await import('node:http');
    const dir = mkdtempSync(join(tmpdir(), 'tls-'));
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    );
    const cert = readFileSync(join(dir, 'cert.pem'), 'utf8');
    const key = readFileSync(join(dir, 'key.pem'));
    const { SimFleet } = await import('../../sim/fleet');
    const fleet = await SimFleet.start([vllm()]);
    const plain = new URL(fleet.urls[0]!);
    // TLS in front of the simulated replica, as a real replica behind https.
    const tls = https.createServer({ key, cert }, (q, s) => {
      const up = http.request(
        { host: plain.hostname, port: plain.port, path: q.url, method: q.method, headers: q.headers },
        (r) => {
          s.writeHead(r.statusCode!, r.headers);
          r.pipe(s);
        },
      );
      q.pipe(up);
    });
    await new Promise<void>((r) => tls.listen(0, '127.0.0.1', r));
    const url = `https://127.0.0.1:${(tls.address() as { port: number }).port}`;
    const own = await PluginServerProcess.start({
      pluginsDir: PLUGINS_DIR,
      env: { NODE_EXTRA_CA_CERTS: join(dir, 'cert.pem') },
    });
    const d = new KongDriver(own.socketPath);
    try {
      const gw = await LocalGateway.create({
        driver: d,
        plugins: [{ name: 'lora-router', config: { replicas: [{ url }], base_model: BASE } }],
        serviceUrl: fleet.urls[0]!, // the Service is http: the scheme must come from the plugin
        upstreamCa: cert,
      });
      const r = await gw.handle({ path: '/v1/chat/completions', body: chatBody(BASE) });
      expect([r.status, r.kong.scheme]).toEqual([200, 'https']);
      expect(r.kong.pdkCalls.access).toContain('kong.service.request.set_scheme');
      await gw.close();
    } finally {
      d.close();
      await own.stop();
      tls.close();
      await fleet.stop();
      // The private key stays nowhere once the test is over.
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('7. polling does not wait for the status page', () => {
  it("kong.yml's lora-poller starts, with its settings, on the first LLM request", async () => {
    const { readKongYaml } = await import('../../stack/kong-config');
    const fleet = readKongYaml(`${__dirname}/../../kong.yml`).find((s) => s.name === 'llm-fleet')!;
    const { SimFleet } = await import('../../sim/fleet');
    const sims = await SimFleet.start([vllm()]);
    const plugins = fleet.plugins.map((p) => {
      const config = { ...p.config, redis: undefined };
      if (p.name === 'lora-router') Object.assign(config, { replicas: [{ url: sims.urls[0] }] });
      return { name: p.name, config };
    });
    const gw = await LocalGateway.create({ driver, plugins, serviceUrl: sims.urls[0]!, workers: 1 });
    try {
      const r = await gw.handle({ path: '/v1/chat/completions', body: chatBody(BASE) });
      expect(r.status).toBe(200);
      expect(gw.instances.map((i) => i.name).sort()).toEqual(['lora-poller', 'lora-router']);
      const status = await gw.handle({ method: 'GET', path: '/lora/status' });
      expect(json(status.body).poller.running).toBe(true);
    } finally {
      await gw.close();
      await sims.stop();
    }
  });
});
