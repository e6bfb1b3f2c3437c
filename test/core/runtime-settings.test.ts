import { VirtualClock } from '../../src/clock';
import { parseRouterConfig } from '../../src/config/parse';
import { silentLogger } from '../../src/log';
import { RouterService } from '../../src/router/router';
import { FleetRuntime } from '../../src/runtime';
import { fleetStatus } from '../../src/status/status';

const A = 'http://10.0.0.1:8000';
const B = 'http://10.0.0.2:8000';
const load = { running: 0, waiting: 2, kvUsage: 0, activeAdapters: [], malformedLines: 0 };

/** Two router configurations on one runtime, registered in either order. */
function twoConfigs(order: 'ab' | 'ba') {
  const rt = new FleetRuntime({ clock: new VirtualClock(), log: silentLogger, seed: 1 });
  const a = parseRouterConfig({
    replicas: [{ url: A }],
    // The count rule: its figure is the policy's (predicted figures: test/kong/saturation-figures.test.ts).
    saturation_mode: 'count',
    target_waiting_per_replica: 1,
    lease_max_age_ms: 1000,
  });
  const b = parseRouterConfig({
    replicas: [{ url: B }],
    saturation_mode: 'count',
    target_waiting_per_replica: 100,
    lease_max_age_ms: 900_000,
  });
  for (const c of order === 'ab' ? [a, b] : [b, a]) new RouterService(c, rt);
  return rt;
}

describe('settings the runtime shares between configurations', () => {
  it.each(['ab', 'ba'] as const)(
    "report each replica's saturation with its own configuration's policy, whichever registered last (%s)",
    async (order) => {
      const rt = twoConfigs(order);
      try {
        for (const url of [A, B]) await rt.store.upsertReplica({ url, backend: 'vllm', priority: 0 });
        for (const url of [A, B]) await rt.store.applySnapshot(url, { at: rt.clock.now(), ok: true, load });
        const s = await fleetStatus(rt);
        expect(Object.fromEntries(s.replicas.map((r) => [r.url, r.saturation]))).toEqual({
          [A]: 2,
          [B]: 0.02,
        });
        const text = await rt.metrics.registry.getSingleMetricAsString('lora_router_replica_saturation');
        expect(text).toContain(`lora_router_replica_saturation{replica="${A}"} 2`);
        expect(text).toContain(`lora_router_replica_saturation{replica="${B}"} 0.02`);
      } finally {
        rt.poller.stop();
      }
    },
  );

  it.each(['ab', 'ba'] as const)(
    'reclaim a lease only past the longest `lease_max_age_ms` of the configurations (%s)',
    (order) => {
      const rt = twoConfigs(order);
      rt.poller.stop();
      expect(rt.poller.leaseMaxAgeMs).toBe(900_000);
    },
  );

  it("adds listeners to the poller and the manager: one more does not silence the runtime's metrics", async () => {
    // No replica answers on this port: each poll fails.
    const rt = new FleetRuntime({ clock: new VirtualClock(), log: silentLogger, seed: 1 });
    const seen: string[] = [];
    rt.poller.addPollListener((url, ok) => seen.push(`${url} ${ok}`));
    rt.manager.addCallListener((r) => seen.push(r.op));
    const spec = { url: 'http://127.0.0.1:9', backend: 'vllm' as const, priority: 0 };
    await rt.store.upsertReplica(spec);
    await rt.poller.refresh(spec);
    expect(seen).toEqual(['http://127.0.0.1:9 false']);
    expect(await rt.metrics.registry.getSingleMetricAsString('lora_router_poll_errors_total')).toContain(
      'lora_router_poll_errors_total{replica="http://127.0.0.1:9"} 1',
    );
  });

  it("take a changed configuration's `lease_max_age_ms` for its replicas", () => {
    const rt = twoConfigs('ab');
    rt.poller.stop();
    new RouterService(
      parseRouterConfig({
        replicas: [{ url: B }],
        target_waiting_per_replica: 100,
        lease_max_age_ms: 60_000,
      }),
      rt,
    );
    expect(rt.poller.leaseMaxAgeMs).toBe(60_000);
  });

  it("poll as often as the most demanding lora-poller asks, and take a reloaded plugin's new settings", () => {
    const rt = new FleetRuntime({ clock: new VirtualClock(), log: silentLogger, seed: 1 });
    rt.registerPolling('plugin-1', { intervalMs: 500, timeoutMs: 1000, jitter: 0.1 });
    rt.registerPolling('plugin-2', { intervalMs: 2000, timeoutMs: 3000, jitter: 0 });
    // Whichever spoke last, the shortest interval and the longest timeout hold.
    expect([rt.poller.intervalMs, rt.poller.timeoutMs]).toEqual([500, 3000]);
    // A reload of plugin-1 (same Kong plugin id) replaces its settings instead of adding to them.
    rt.registerPolling('plugin-1', { intervalMs: 5000, timeoutMs: 1000, jitter: 0.1 });
    expect([rt.poller.intervalMs, rt.poller.timeoutMs]).toEqual([2000, 3000]);
  });
});
