/**
 * Soak: many requests through the real plugin server with random faults, bounded in count and
 * time. Afterwards every in-flight count is 0, the plugin server's heap is within 10% of what
 * it was after the first tenth, and nothing was logged as an unhandled rejection.
 *
 * npm test runs 5,000 requests (10,000 until the CI run reached 16 minutes). The full soak: SOAK_REQUESTS=100000 npx jest test/reliability/soak.test.ts
 */
import { join } from 'node:path';
import { seededRandom } from '../../src/random';
import { KongDriver, PluginServerProcess } from '../../harness/kong/driver';
import { ROOT } from '../../harness/kong/process';
import { BASE, PLUGINS_DIR, startWorld, vllm } from '../kong/world';

const N = Number(process.env.SOAK_REQUESTS ?? 5_000);
const MAX_S = Number(process.env.SOAK_MAX_S ?? Math.max(120, N / 200));

let server: PluginServerProcess;
let driver: KongDriver;
const heapAnswers: number[] = [];
const unhandled: string[] = [];
beforeAll(async () => {
  server = await PluginServerProcess.start({
    pluginsDir: PLUGINS_DIR,
    nodeArgs: ['--expose-gc', '--require', join(ROOT, 'harness', 'kong', 'heap-probe.cjs')],
    // Watch the stream itself: a long run logs more lines than the driver keeps.
    onLog: (line) => {
      if (line.startsWith('heap-probe ')) heapAnswers.push(Number(line.split(' ')[1]));
      if (/unhandled/i.test(line)) unhandled.push(line);
    },
  });
  driver = new KongDriver(server.socketPath);
});
afterAll(async () => {
  driver?.close();
  await server?.stop();
});

/** The plugin server's heap after a full GC, in bytes. */
async function heap(): Promise<number> {
  const before = heapAnswers.length;
  server.child.kill('SIGUSR2');
  const end = Date.now() + 5000;
  for (;;) {
    if (heapAnswers.length > before) return heapAnswers[before]!;
    if (Date.now() > end) throw new Error('no heap-probe answer');
    await new Promise((r) => setTimeout(r, 10));
  }
}

it(
  `serves ${N.toLocaleString('en-US')} requests with random faults: nothing leaks`,
  async () => {
    const w = await startWorld(
      driver,
      Array.from({ length: 3 }, () => vllm({ timeScale: 50, engine: { loadBaseMs: 500 } })),
      (u) => ({
        replicas: u.map((url) => ({ url })),
        base_model: BASE,
        adapter_path_template: '/adapters/{name}',
        max_loaded_adapters: 3,
        load_timeout_ms: 500,
        queue_timeout_ms: 500,
        backoff_base_ms: 200,
        backoff_max_ms: 1000,
      }),
      { timeouts: { read_timeout: 1000 } },
    );
    try {
      const rand = seededRandom(5);
      const t0 = Date.now();
      let sent = 0;
      let checkpoint: number | undefined;
      const statuses: Record<number, number> = {};
      const faults = ['error500', 'failLoads', 'slowMetrics', 'restart', 'hang'] as const;
      const worker = async () => {
        while (sent < N && Date.now() - t0 < MAX_S * 1000) {
          const i = sent++;
          if (i % 500 === 499) {
            // A random fault on a random replica, lifted 200 ms later.
            const r = w.fleet.replicas[Math.floor(rand() * w.fleet.replicas.length)]!;
            const kind = faults[Math.floor(rand() * faults.length)]!;
            if (kind === 'restart') void r.fault({ kind: 'restart' });
            else {
              await r.fault(
                kind === 'failLoads'
                  ? { kind, count: 5 }
                  : kind === 'slowMetrics'
                    ? { kind, ms: 150 }
                    : { kind, on: true },
              );
              setTimeout(() => void r.fault({ kind: 'clear' }), 200);
            }
          }
          const reply = await w.chat(`tenant-${Math.floor(Math.pow(rand(), 2) * 12)}`, 1);
          statuses[reply.status] = (statuses[reply.status] ?? 0) + 1;
          if (i === Math.floor(N / 10) && checkpoint === undefined) checkpoint = await heap();
        }
      };
      await Promise.all(Array.from({ length: 16 }, worker));
      for (const r of w.fleet.replicas) await r.fault({ kind: 'clear' });
      expect(sent).toBeGreaterThanOrEqual(N); // bounded by count, not cut short by the time bound
      expect(statuses[200]! / N).toBeGreaterThan(0.8);
      expect((await w.statusJson()).inFlight).toBe(0);
      const end = await heap();
      console.log(
        `soak: ${N} requests in ${((Date.now() - t0) / 1000).toFixed(1)} s, statuses ${JSON.stringify(statuses)}, heap after ${N / 10}: ${(checkpoint! / 1048576).toFixed(1)} MB, after all: ${(end / 1048576).toFixed(1)} MB`,
      );
      expect(end).toBeLessThanOrEqual(checkpoint! * 1.1);
      expect(server.exited).toBe(false);
      expect(unhandled).toEqual([]);
      for (const r of w.fleet.replicas)
        for (const e of r.adapterLog().filter((x) => x.op === 'unload' && x.status === 200))
          expect(e.inFlight).toBe(0);
    } finally {
      await w.stop();
    }
  },
  (MAX_S + 60) * 1000,
);
