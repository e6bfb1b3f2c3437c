/**
 * Many requests a plugin answers with `kong.response.exit`, driven as Kong drives them, and
 * the plugin server's heap after a full GC: the proof that an exit leaves nothing behind
 * (kong-pdk 0.6.0 alone keeps each such event forever). Used by a test and the benchmark.
 */
import { join } from 'node:path';
import { KongDriver, KongRequest, PluginServerProcess } from './driver';
import { ROOT } from './process';

export interface ExitRun {
  requests: number;
  /** Heap in use after a full GC, in bytes: after the warm-up, then after every request. */
  heapBefore: number;
  heapAfter: number;
  /** Answers by status. */
  statuses: Record<number, number>;
}

/** A plugin server with the heap probe (harness/kong/heap-probe.cjs) preloaded. */
async function startProbedServer(pluginsDir: string, binary?: string) {
  const answers: number[] = [];
  const server = await PluginServerProcess.start({
    pluginsDir,
    binary,
    nodeArgs: ['--expose-gc', '--require', join(ROOT, 'harness', 'kong', 'heap-probe.cjs')],
    onLog: (line) => {
      if (line.startsWith('heap-probe ')) answers.push(Number(line.split(' ')[1]));
    },
  });
  const heap = async (): Promise<number> => {
    const before = answers.length;
    server.child.kill('SIGUSR2');
    const end = Date.now() + 10_000;
    while (answers.length === before) {
      if (Date.now() > end) throw new Error('no heap-probe answer');
      await new Promise((r) => setTimeout(r, 10));
    }
    return answers[before]!;
  };
  return { server, heap };
}

/**
 * `requests` refused requests through lora-router (an unknown model: 404, one exit each) on
 * `concurrency` connections, after `warmup` more; heap measured after the warm-up and at the end.
 */
export async function refuseMany(
  pluginsDir: string,
  o: { requests: number; warmup?: number; concurrency?: number; binary?: string },
): Promise<ExitRun> {
  const { server, heap } = await startProbedServer(pluginsDir, o.binary);
  const driver = new KongDriver(server.socketPath);
  try {
    const inst = await driver.startInstance('lora-router', {
      replicas: [{ url: 'http://127.0.0.1:9' }],
      base_model: 'base',
    });
    const body = Buffer.from('{"model":"no-such-adapter","prompt":"x"}');
    const statuses: Record<number, number> = {};
    const run = async (n: number) => {
      let next = 0;
      const lane = async () => {
        while (next < n) {
          next++;
          const req = new KongRequest({ path: '/v1/completions', body });
          await driver.handleEvent(inst.Id, 'access', req);
          const s = req.exit?.status ?? 0;
          statuses[s] = (statuses[s] ?? 0) + 1;
        }
      };
      await Promise.all(Array.from({ length: o.concurrency ?? 8 }, lane));
    };
    await run(o.warmup ?? 2000);
    const heapBefore = await heap();
    await run(o.requests);
    const heapAfter = await heap();
    return { requests: o.requests, heapBefore, heapAfter, statuses };
  } finally {
    driver.close();
    await server.stop();
  }
}
