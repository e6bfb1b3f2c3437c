/**
 * What the plugin server's young-generation collections keep, per routed request: the request's
 * objects die with it, so a collection should copy next to nothing. A closure made per request
 * and stored in its scheduling context (`ctx.contextOf`) kept that request's objects (parsed
 * body, the decision's context) alive through the next collection, which promoted them: about
 * 3.2-4.8 KB a request (1 KB body, adapter resident; Node 24 and 20), the collections' work
 * several times the no-op plugin's. Counted (GCProfiler in the server,
 * harness/kong/gc-probe.cjs), not timed.
 */
import { join } from 'node:path';
import { KongDriver, KongRequest, PluginServerProcess } from '../../harness/kong/driver';
import { ROOT } from '../../harness/kong/process';
import { useSimFleet } from '../helpers/sim-fleet';
import { PLUGINS_DIR } from './world';

const sim = useSimFleet();
const WARM = 2000;
const N = 6000;

it('keeps next to nothing of a routed request through a young-generation collection', async () => {
  const [url] = await sim.start({
    staticAdapters: [{ name: 'bench-adapter', path: '/adapters/bench-adapter' }],
    maxModelLen: 1 << 20,
  });
  const probes: [number, number][] = [];
  const server = await PluginServerProcess.start({
    pluginsDir: PLUGINS_DIR,
    nodeArgs: ['--require', join(ROOT, 'harness', 'kong', 'gc-probe.cjs')],
    onLog: (line) => {
      const m = /^gc-probe (-?\d+) (\d+)$/.exec(line);
      if (m) probes.push([Number(m[1]), Number(m[2])]);
    },
  });
  const driver = new KongDriver(server.socketPath);
  try {
    const { Id } = await driver.startInstance('lora-router', {
      replicas: [{ url }],
      base_model: 'base',
      max_loaded_adapters: 4,
    });
    const head = '{"model":"bench-adapter","max_tokens":1,"messages":[{"role":"user","content":"';
    const body = Buffer.from(head + 'x'.repeat(1024 - head.length - 4) + '"}]}');
    const request = async () => {
      const req = new KongRequest({ path: '/v1/chat/completions', body });
      await driver.handleEvent(Id, 'access', req);
      req.status = 200;
      await driver.handleEvent(Id, 'log', req);
      expect(req.exit).toBeUndefined();
    };
    for (let i = 0; i < WARM; i++) await request();
    server.child.kill('SIGUSR2');
    for (let i = 0; i < N; i++) await request();
    server.child.kill('SIGUSR2');
    const end = Date.now() + 5000;
    while (probes.length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
    const [promoted, scavenges] = probes[0]!;
    // Enough collections to count: each takes a few hundred requests' garbage.
    expect(scavenges).toBeGreaterThanOrEqual(3);
    // It promoted 3.2-4.8 KB a request, 550 with a closure per request left (ctx.predict); the
    // no-op plugin's plugin server promotes about 190 bytes a request of its own.
    expect(promoted / N).toBeLessThan(450);
  } finally {
    driver.close();
    await server.stop();
  }
}, 180_000);
