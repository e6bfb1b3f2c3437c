/**
 * Replicas that leave the node (src/runtime-departures.ts, src/fleet/node-claim.ts): a fleet whose
 * addresses change registers a new configuration of one plugin each time (Kong keeps the plugin's
 * `__plugin_id`). Without Redis, once the superseded configuration has been unused for the grace,
 * its replicas are polled no more and nothing of them is kept in this process. Counted from the
 * replica calls made (the replicas' own request log, as the API sees it), not from the router's
 * counters. No shared state here: the store is this node's; the store's own forgetting
 * (FleetStore.retainReplicas) is the store's suite's.
 */
import { VirtualClock } from '../../src/clock';
import { parseRouterConfig } from '../../src/config/parse';
import { silentLogger } from '../../src/log';
import { RouterService } from '../../src/router/router';
import { FleetRuntime } from '../../src/runtime';
import { forgetReplica, RETAIN_EVERY_MS } from '../../src/runtime-departures';
import { fleetStatus } from '../../src/status/status';
import { IdleReplicaApi } from '../helpers/idle-replicas';

const BASE = 'base';
const INTERVAL_MS = 1000;
/** The lapse grace with `lease_max_age_ms` at its least: MIN_LAPSE_MS (node-claim.ts). */
const GRACE_MS = 60_000;

/** The fleet at step `i`: two replicas, both new addresses. */
const urlsAt = (i: number) => [`http://10.1.${i}.1:8000`, `http://10.1.${i}.2:8000`];
const fleetAt = (i: number, mode = 'predicted', leaseMaxAgeMs = 1000) =>
  parseRouterConfig({
    replicas: urlsAt(i).map((url) => ({ url })),
    base_model: BASE,
    adapter_path_template: '/adapters/{name}',
    saturation_mode: mode,
    lease_max_age_ms: leaseMaxAgeMs,
  });

function world(mode?: 'count', leaseMaxAgeMs?: number) {
  const clock = new VirtualClock();
  // Those in `alive` answer, the others refuse (a pod gone).
  const alive = new Set<string>();
  const api = new IdleReplicaApi(
    () => clock.now(),
    (url) => alive.has(url),
  );
  const rt = new FleetRuntime({
    clock,
    api,
    log: silentLogger,
    seed: 1,
    poller: { intervalMs: INTERVAL_MS, jitter: 0 },
  });
  /** One plugin's configuration `i`, as Kong starts it (the same `__plugin_id` each time). */
  const configure = (i: number) => {
    for (const u of urlsAt(i)) alive.add(u);
    return new RouterService(fleetAt(i, mode, leaseMaxAgeMs), rt, 'plugin-1');
  };
  const polledIn = (from: number, to: number) => api.polledIn(from, to);
  /** What this process keeps per replica URL, by holder (each should hold the current fleet only). */
  const perUrl = async () => {
    const poller = rt.poller as unknown as Record<string, Map<string, unknown> | Set<string>>;
    const errors = (await rt.metrics.pollErrors.get()).values.length;
    const series = (await rt.metrics.registry.getSingleMetric('lora_router_in_flight')!.get()).values.length;
    return {
      lastLoad: rt.poller.lastLoad.size,
      maxModelLen: rt.poller.maxModelLen.size,
      timeoutsInRow: poller['timeoutsInRow']!.size,
      work: (rt.work as unknown as { replicas: Map<string, unknown> }).replicas.size,
      pollErrorSeries: errors,
      inFlightSeries: series,
      status: (await fleetStatus(rt)).replicas.length,
    };
  };
  return { clock, api, alive, rt, configure, polledIn, perUrl };
}

describe('replicas that leave the configuration, without Redis', () => {
  it('200 changes of one plugin with new addresses each: polled and kept per url, only the current 2', async () => {
    const { clock, api, alive, rt, configure, polledIn, perUrl } = world();
    try {
      // A change every 2 s; the departed pods refuse at once.
      const departedAt = new Map<string, number>();
      for (let i = 0; i < 200; i++) {
        for (const u of i > 0 ? urlsAt(i - 1) : []) {
          alive.delete(u);
          departedAt.set(u, clock.now());
        }
        configure(i);
        await clock.run(clock.now() + 2000);
      }
      await clock.run(clock.now() + GRACE_MS + 3 * INTERVAL_MS);
      const end = clock.now();
      // Polls of a replica gone for longer than the grace and a round: none.
      const late = api.calls.filter((c) => {
        const d = departedAt.get(c.url);
        return d !== undefined && c.at > d + GRACE_MS + 2 * INTERVAL_MS;
      }).length;
      expect(late).toBe(0);
      // Meanwhile each round polled the replicas of the configurations within their grace, no more:
      // one change every 2 s, 2 replicas each.
      let most = 0;
      for (let t = INTERVAL_MS; t <= end; t += INTERVAL_MS)
        most = Math.max(most, polledIn(t - INTERVAL_MS, t).size);
      expect(most).toBeLessThanOrEqual(2 * (GRACE_MS / 2000 + 2));
      expect([...polledIn(end - 2 * INTERVAL_MS, end)].sort()).toEqual(urlsAt(199).sort());
      expect(await perUrl()).toEqual({
        lastLoad: 2,
        maxModelLen: 2,
        timeoutsInRow: 0,
        work: 2,
        pollErrorSeries: 0,
        inFlightSeries: 2,
        status: 2,
      });
      // The store forgot them too (FleetStore.retainReplicas, a grace after the lapse, at the
      // store's next forget check), and the node's claim keeps no departed replica's name once the
      // store's list no longer names it.
      await clock.run(clock.now() + RETAIN_EVERY_MS + 2 * INTERVAL_MS);
      expect((await rt.store.replicaSpecs()).map((s) => s.url).sort()).toEqual(urlsAt(199).sort());
      expect(rt.claim.size).toEqual({ live: 1, superseded: 0, released: 0 });
    } finally {
      rt.stop();
    }
  });

  it('a superseded configuration still used keeps its replicas polled; unused past the grace, they go', async () => {
    const { clock, rt, configure, polledIn, perUrl } = world();
    try {
      const old = configure(0);
      await clock.run(clock.now() + 3 * INTERVAL_MS);
      configure(1);
      // A worker still on the old configuration sends a request through it every 10 s for 2 minutes.
      const body = Buffer.from(JSON.stringify({ model: BASE, prompt: 'hi', max_tokens: 1 }));
      for (let t = 0; t < 120_000; t += 10_000) {
        const r = await old.route({ path: '/v1/completions', body });
        expect(r.kind).toBe('proxy');
        if (r.kind === 'proxy') await old.finish(r.leaseId, 200);
        await clock.run(clock.now() + 10_000);
      }
      const used = clock.now();
      expect([...polledIn(used - 2 * INTERVAL_MS, used)].sort()).toEqual([...urlsAt(0), ...urlsAt(1)].sort());
      // Unused from here: past the grace, only the current configuration's replicas are polled.
      await clock.run(used + GRACE_MS + 3 * INTERVAL_MS);
      const end = clock.now();
      expect([...polledIn(end - 2 * INTERVAL_MS, end)].sort()).toEqual(urlsAt(1).sort());
      expect(await perUrl()).toMatchObject({ lastLoad: 2, maxModelLen: 2, work: 2, status: 2 });
    } finally {
      rt.stop();
    }
  });

  it('a replica left with a request still running on it is polled while its lease is open: the polls renew it', async () => {
    // Leases renewed by polls (vLLM reports what runs), reclaimed 60 s after the last renewal, and
    // 4 times that after taken whatever the renewals (LEASE_CEILING): the grace is 60 s.
    const MAX_AGE_MS = 60_000;
    const { clock, api, rt, configure } = world('count', MAX_AGE_MS);
    // The replica reports a request running (the long one below): each poll renews its lease.
    api.scrape = async (r) => {
      api.calls.push({ url: r.url, at: clock.now() });
      return {
        load: { waiting: 0, running: 1, kvUsage: 0.1, activeAdapters: [], malformedLines: 0 },
        registry: [],
        maxModelLen: 4096,
      };
    };
    try {
      const service = configure(0);
      await clock.run(clock.now() + 3 * INTERVAL_MS);
      const body = Buffer.from(JSON.stringify({ model: BASE, prompt: 'hi', max_tokens: 1 }));
      const r = await service.route({ path: '/v1/completions', body });
      if (r.kind !== 'proxy') throw new Error(`not proxied: ${JSON.stringify(r)}`);
      // The configuration changes; the request streams on past the grace and a max age more
      // (2.7 of them: within the ceiling).
      configure(1);
      await clock.run(clock.now() + GRACE_MS + MAX_AGE_MS + 40 * INTERVAL_MS);
      const end = clock.now();
      expect({
        leaseOpen: rt.leasesOn(r.url),
        expired: (
          await rt.metrics.registry.getSingleMetric('lora_router_leases_expired_total')?.get()
        )?.values
          .map((v) => v.value)
          .reduce((a, b) => a + b, 0),
        polled: api.polledIn(end - 2 * INTERVAL_MS, end).has(r.url),
        // The store keeps the replica its request runs on.
        listed: (await rt.store.replicaSpecs()).some((x) => x.url === r.url),
      }).toEqual({ leaseOpen: true, expired: 0, polled: true, listed: true });
      await service.finish(r.leaseId, 200);
    } finally {
      rt.stop();
    }
  });

  it("keeps a replica's records while a request of this process is on it", async () => {
    // Counted saturation: no work model entry of the request stands in for its lease.
    const { clock, rt, configure } = world('count');
    try {
      const service = configure(0);
      await clock.run(clock.now() + 3 * INTERVAL_MS);
      const body = Buffer.from(JSON.stringify({ model: BASE, prompt: 'hi', max_tokens: 1 }));
      const r = await service.route({ path: '/v1/completions', body });
      if (r.kind !== 'proxy') throw new Error(`not proxied: ${JSON.stringify(r)}`);
      expect(forgetReplica(rt, r.url)).toBe(false);
      expect(rt.poller.lastLoad.has(r.url)).toBe(true);
      await service.finish(r.leaseId, 200);
      expect(forgetReplica(rt, r.url)).toBe(true);
      expect(rt.poller.lastLoad.has(r.url)).toBe(false);
    } finally {
      rt.stop();
    }
  });
});
