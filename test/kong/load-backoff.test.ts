/**
 * Through the real plugin server: a load that failed on one replica backs off there, and the next
 * request for that adapter is served by another replica instead of a 503 (docs/routing.md, "A
 * load backing off"). Simulated vLLM replicas on loopback.
 */
import type { KongDriver } from '../../harness/kong/driver';
import { json, onDemand, startWorld, usePluginServer, vllm } from './world';

let driver: KongDriver;
usePluginServer((_server, d) => {
  driver = d;
});

it('a load failed on one replica: the next request for that adapter is served by the other', async () => {
  const w = await startWorld(driver, [vllm(), vllm()], (u) =>
    onDemand(u, { max_loaded_adapters: 1, backoff_base_ms: 60_000 }),
  );
  try {
    // One slot each: `other` fills one replica (Y), so the rule prefers the other's free slot (X).
    expect((await w.chat('other')).status).toBe(200);
    const y = w.loads(0, 'other').length === 1 ? 0 : 1;
    const x = 1 - y;
    await w.fleet.replicas[x]!.fault({ kind: 'failLoads', count: 10 });
    const failed = await w.chat('x');
    expect([failed.status, json(failed.body).error.code]).toEqual([502, 'adapter_load_failed']);
    const next = await w.chat('x');
    const code = next.status === 200 ? undefined : json(next.body).error?.code;
    expect({ status: next.status, code }).toEqual({ status: 200, code: undefined });
    // No second attempt where it backs off; loaded on the other (its idle `other` unloaded).
    expect(w.loads(x, 'x')).toHaveLength(1);
    expect(w.loads(y, 'x').map((e) => e.status)).toEqual([200]);
    expect(w.fleet.replicas[y]!.requestRecords().filter((r) => r.adapter === 'x')).toHaveLength(1);
  } finally {
    await w.stop();
  }
});
