/**
 * A routed request Kong cannot proxy (connection refused: a replica killed between two polls)
 * marks that replica down for routing at once, through the real plugin server and the local
 * gateway: the requests after it go elsewhere, without waiting for a poll or for passive
 * health's three failures in a row.
 */
import { KongDriver, PluginServerProcess } from '../../harness/kong/driver';
import { BASE, usePluginServer, startWorld, vllm } from '../kong/world';

let driver: KongDriver;
usePluginServer((_s: PluginServerProcess, d) => {
  driver = d;
});

const replicaOf = (reply: { kong: { ctxShared: Map<string, unknown> } }) =>
  (reply.kong.ctxShared.get('lora_router') as { replica: string } | undefined)?.replica;

it('a replica Kong could not reach gets no further request, before any poll sees it down', async () => {
  const w = await startWorld(driver, [vllm({ timeScale: 20 }), vllm({ timeScale: 20 })], (u) => ({
    // The first replica is the preferred pool: every request goes there while it is up.
    replicas: u.map((url, i) => ({ url, priority: i === 0 ? 1 : 0 })),
    base_model: BASE,
    adapter_path_template: '/adapters/{name}',
    max_loaded_adapters: 2,
    // No refresh before routing, and a slow poller: only the proxy path can tell the router.
    stale_after_ms: 600_000,
  }));
  // The poller (lora-router starts it at 500 ms) would see the kill on its own: a slow one.
  await driver.startInstance('lora-poller', { poll_interval_ms: 60_000, timeout_ms: 1000 });
  try {
    const dead = w.fleet.replicas[0]!;
    const first = await w.chat(BASE);
    expect([first.status, replicaOf(first)]).toEqual([200, dead.url]);
    await dead.fault({ kind: 'kill' });
    // The next request is routed to it: connection refused, Kong's own 502.
    const failed = await w.chat(BASE);
    expect([failed.status, replicaOf(failed)]).toEqual([502, dead.url]);
    // From the next request on, none goes to it, and all are served.
    const after = [];
    for (let i = 0; i < 6; i++) after.push(await w.chat(i % 2 ? 'y' : BASE));
    expect(after.map((r) => [replicaOf(r) === dead.url, r.status])).toEqual(after.map(() => [false, 200]));
    const status = await w.statusJson();
    expect(status.replicas.find((r: { url: string }) => r.url === dead.url).health).toBe('down');
    expect(status.inFlight).toBe(0);
  } finally {
    await w.stop();
  }
});
