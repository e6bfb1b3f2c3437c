/**
 * The driver behaves like Kong's Lua side (Kong/kong 3.9.3 kong/runloop/plugin_servers/): the
 * behaviours every other plugin test stands on, checked against the real plugin server.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { LocalGateway } from '../../stack/gateway';
import { KongDriver, KongRequest, PluginServerProcess } from '../../harness/kong/driver';
import { BASE, PLUGINS_DIR, startWorld, usePluginServer, vllm } from './world';

let driver: KongDriver;
usePluginServer((_s: PluginServerProcess, d) => {
  driver = d;
});

const chat = () =>
  Buffer.from(JSON.stringify({ model: BASE, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 }));
const config = (urls: string[]) => ({ replicas: urls.map((url) => ({ url })), base_model: BASE });

type World = Awaited<ReturnType<typeof startWorld>>;
let w: World | undefined;
afterEach(async () => {
  await w?.stop();
  w = undefined;
});

it('each worker starts its own instance lazily, on the first request it runs through a config', async () => {
  w = await startWorld(driver, [vllm()], config, { workers: 2 });
  expect(w.service.instances).toEqual([]);
  await w.service.handle({ path: '/v1/chat/completions', body: chat() });
  expect(w.service.instances.map((i) => i.worker)).toEqual([0]);
  await w.service.handle({ path: '/v1/chat/completions', body: chat() });
  const ids = w.service.instances;
  expect(ids.map((i) => i.worker).sort()).toEqual([0, 1]);
  expect(new Set(ids.map((i) => i.id)).size).toBe(2);
  // Kong's config: unset fields as null, Kong's keys, no route/service/consumer keys when unscoped.
  const conf = w.service.configs[0]!.conf;
  expect(conf).toMatchObject({
    __seq__: expect.any(Number),
    __ws_id: expect.any(String),
    redis: { host: null },
  });
  expect(conf.__key__).toBe(`plugins:lora-router:::::${String(conf.__ws_id)}`);
  expect('route_id' in conf || 'plugin_instance_name' in conf).toBe(false);
});

it('a config change starts a new instance on each worker at its next request, closing the old one', async () => {
  w = await startWorld(driver, [vllm()], config, { workers: 1 });
  await w.service.handle({ path: '/v1/chat/completions', body: chat() });
  const before = w.service.instances[0]!.id;
  await w.service.configure([
    { name: 'lora-router', config: { ...config(w.fleet.urls), decision_headers: true } },
  ]);
  expect(w.service.instances).toEqual([]); // nothing starts until a request comes
  const r = await w.service.handle({ path: '/v1/chat/completions', body: chat() });
  expect(r.headers['X-Lora-Stage']).toBe('base');
  expect(w.service.instances[0]!.id).not.toBe(before);
  await expect(driver.closeInstance(before)).rejects.toThrow(/no plugin instance/);
});

it('StartInstance failing is a 500; a failing HandleEvent lets the request through to the service', async () => {
  w = await startWorld(driver, [vllm()], config, { workers: 1 });
  const worker = w.service.node.workers[0]!;
  // A config the plugin refuses in its constructor (Kong validated another schema, say).
  const bad = {
    name: 'lora-poller',
    conf: { ...w.service.configs[0]!.conf, __plugin_id: 'p-bad', bogus: 1 },
  };
  const req = new KongRequest({ method: 'GET', path: '/lora/status' });
  await worker.run(bad, 'access', req);
  expect([req.exit?.status, req.luaErrors.length]).toEqual([500, 1]);
  // HandleEvent for an instance the server does not know, as after a restart: Kong resets and retries.
  const ok = new KongRequest({ path: '/v1/chat/completions', body: chat() });
  await worker.run(w.service.configs[0]!, 'access', ok);
  await driver.closeInstance(w.service.instances[0]!.id);
  const again = new KongRequest({ path: '/v1/chat/completions', body: chat() });
  await worker.run(w.service.configs[0]!, 'access', again);
  expect(again.target).toBeDefined();
  expect(worker.errors.some((e) => /no plugin instance/.test(e))).toBe(true);
  // The plugin server gone: a worker with the instance id cached lets the request through to
  // the service's own host (Kong logs the error); one that must start an instance answers 500.
  const own = await PluginServerProcess.start({ pluginsDir: PLUGINS_DIR });
  const d = new KongDriver(own.socketPath);
  const gw = await LocalGateway.create({
    driver: d,
    plugins: [{ name: 'lora-router', config: config(w.fleet.urls) }],
    serviceUrl: w.fleet.urls[0]!,
    workers: 2,
  });
  await gw.handle({ path: '/v1/chat/completions', body: chat() }); // worker 0 caches its id
  await own.kill();
  const through = await gw.handle({ path: '/v1/chat/completions', body: chat() }); // worker 1: must start one
  expect(through.status).toBe(500);
  const cached = await gw.handle({ path: '/v1/chat/completions', body: chat() }); // worker 0
  expect([cached.status, cached.kong.exit, cached.kong.target]).toEqual([200, undefined, undefined]);
  await gw.close();
  await own.stop();
});

it('sends the Host Kong sends, and lets exit headers override earlier set_header calls', async () => {
  const seen: string[] = [];
  const echo = http.createServer((q, s) => {
    seen.push(q.headers.host ?? '');
    s.end('ok');
  });
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  const port = (echo.address() as AddressInfo).port;
  try {
    let target = false;
    const gw = await LocalGateway.create({
      driver,
      plugins: [],
      serviceUrl: `http://127.0.0.1:${port}`,
      before: (req) => {
        if (target) req.target = { host: '127.0.0.1', port };
        return undefined;
      },
    });
    await gw.handle({ method: 'GET', path: '/' }); // the balancer's host: port kept (not 80)
    target = true;
    await gw.handle({ method: 'GET', path: '/' }); // set_target: the host alone
    expect(seen).toEqual([`127.0.0.1:${port}`, '127.0.0.1']);
    await gw.close();
  } finally {
    echo.close();
  }
  w = await startWorld(driver, [vllm()], config);
  const req = { path: '/v1/chat/completions', body: Buffer.from('{"model":"nope","messages":[]}') };
  const gw = await LocalGateway.create({
    driver,
    node: w.service.node,
    plugins: [{ name: 'lora-router', config: config(w.fleet.urls) }],
    serviceUrl: w.fleet.urls[0]!,
    before: (r) => {
      r.responseHeaders['content-type'] = 'text/plain';
      return undefined;
    },
  });
  const r = await gw.handle(req);
  expect([r.status, r.headers['Content-Type'], r.headers['content-type']]).toEqual([
    404,
    'application/json',
    undefined,
  ]);
  await gw.close();
});

it('an empty body arrives as bin(0) (a Buffer), which the plugin refuses as a bad request', async () => {
  w = await startWorld(driver, [vllm()], config);
  const req = new KongRequest({ path: '/v1/chat/completions' });
  expect(req.pdk('kong.request.get_raw_body', [1024])).toEqual({ value: Buffer.alloc(0) });
  const r = await w.service.handle({ path: '/v1/chat/completions' });
  expect(r.status).toBe(400);
});

it('a plugin server that never listens is stopped when its start gives up, and the error carries its output', async () => {
  // A start that gives up must not leave its child running: it would keep jest (and CI) alive
  // after the failure (seen: a sentinel run on a loaded machine hung after "did not listen").
  const { writeFileSync, mkdtempSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const dir = mkdtempSync(join(tmpdir(), 'never-listens-'));
  const binary = join(dir, 'never-listens.js');
  writeFileSync(binary, "console.log('starting, never listening'); setInterval(() => {}, 1000);\n");
  const pids: number[] = [];
  try {
    const err = await PluginServerProcess.start({
      pluginsDir: PLUGINS_DIR,
      binary,
      readyMs: 2000,
      onSpawn: (pid) => pids.push(pid),
    }).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/did not listen .* within 2000 ms/);
    expect(err?.message).toContain('starting, never listening');
    expect(pids).toHaveLength(1);
    const alive = () => {
      try {
        process.kill(pids[0]!, 0);
        return true;
      } catch {
        return false;
      }
    };
    expect(alive()).toBe(false);
  } finally {
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    rmSync(dir, { recursive: true, force: true });
  }
});
