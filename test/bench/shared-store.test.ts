/**
 * The simulation's shared store (bench/des/shared-store.ts) as Redis: a release on one node wakes
 * every other node's waiters for room (Redis publishes on release: PUBLISHING), whatever path the
 * node's lease takes to it. Since perf-route a lease goes back through `releaseNow` when its store
 * has one; the handles offered it, and a release there woke no other node (review 58).
 */
import { VirtualClock } from '../../src/clock';
import { LeaseHandle } from '../../src/lease';
import { releaseLease } from '../../src/router/log-phase';
import { FleetRuntime } from '../../src/runtime';
import { silentLogger } from '../../src/log';
import { sharedStoreHandles } from '../../bench/des/shared-store';
import * as P from '../../bench/des/policies';
import { desSetup, routeOk } from '../helpers/des-router';

const URL = 'http://r0:8000';

describe('the simulation shared store', () => {
  it('wakes the other nodes when a lease taken and given back on one node ends', async () => {
    const clock = new VirtualClock();
    const [mine, other] = sharedStoreHandles(clock, 2);
    const rt = new FleetRuntime({ clock, store: mine!, log: silentLogger, seed: 1 });
    await mine!.upsertReplica({ url: URL, backend: 'vllm', priority: 0 });
    let woken = 0;
    other!.onRemoteChange = () => woken++;
    const taken = LeaseHandle.takeNow(rt, URL, null) ?? (await LeaseHandle.take(rt, URL, null));
    await clock.run();
    const before = woken;
    await releaseLease(taken.lease, 200);
    await clock.run();
    expect(woken).toBeGreaterThan(before);
  });

  it('answers no request-path call in the call: each is a round trip, as to Redis', () => {
    const [handle] = sharedStoreHandles(new VirtualClock(), 2);
    expect([handle!.viewsNow, handle!.acquireNow, handle!.releaseNow]).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
  });

  it('runs lora-router on three nodes (bench parts nodes and e2e): each node sets its own callbacks', async () => {
    // Before: the handle refused `onSharedAgain` (set since the snapshot-restart fix) and the
    // policy threw a TypeError before its first request.
    const { clock, fleet, router } = desSetup(P.loraRouterNodes(3));
    const routed = routeOk(router, 'a0');
    await clock.run(clock.now() + 10_000); // the first polls, a load
    expect(fleet.urls).toContain((await routed).url);
  });
});
