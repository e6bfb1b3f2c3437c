/**
 * Unit test of FailoverFleetStore's unload hold-off after it found the shared state emptied
 * (src/fleet/redis/recovering-store.ts `reclaim`, src/fleet/redis/outage.ts): the shared side is a
 * stand-in that says once that the state was lost, on a virtual clock. The real-parts proof over
 * a real redis-server of the server's own grace (`reborn`, beginUnload only) is
 * test/core/empty-restart.test.ts; this one pins the undo, which never asks the server.
 */
import type { Clock } from '../../src/clock';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import type { SharedStore } from '../../src/fleet/redis/shared-store';
import { silentLogger } from '../../src/log';

const PROBE_MS = 1000;
const U = 'http://replica-0:8000';

/** A shared store whose every call answers nothing, but whose next reply says the state was emptied. */
function emptiedOnce(): { shared: SharedStore; empty: () => void } {
  let lost = false;
  const known = {
    liveNodes: 3,
    currentEpoch: 'e2',
    onStateLost: null,
    onRemoteChange: null,
    takeStateLost: () => {
      const was = lost;
      lost = false;
      return was;
    },
    views: async (urls: readonly string[]) => urls.map(() => ({})),
    beginUnload: async () => 7,
  } as Record<string, unknown>;
  const shared = new Proxy(known, {
    get: (o, k: string) => (k in o ? o[k] : async () => undefined),
  }) as unknown as SharedStore;
  return { shared, empty: () => (lost = true) };
}

describe('FailoverFleetStore: a node that found the shared state emptied', () => {
  // The simulation's seed 1012214: a FLUSHALL emptied both states during a `redis` record change to
  // other state; node 2 (old state) and node 0 (new state) each took a load lock of `sql` on
  // replica-0, vLLM answered node 2 200 and node 0 "already loaded", node 0 sent its request, and
  // node 2's after-load check, finding the replica over its limit of 1 (the emptied state had
  // forgotten a load under way there), undid the load under it 1.1 s after it found the state
  // emptied. The server's grace after an emptied state refuses beginUnload, never the undo.
  it('unloads nothing, the after-load undo included, for two probe intervals', async () => {
    const t = { now: 10_000 };
    const clock: Clock = { now: () => t.now, after: () => () => undefined };
    const { shared, empty } = emptiedOnce();
    const s = new FailoverFleetStore(shared, silentLogger, { probeMs: PROBE_MS, logEveryMs: 60_000 }, clock);
    await s.views([U]);
    expect(s.undoHeldOff(1)).toBe(false);
    empty();
    await s.views([U]); // the reply says the state was emptied: this node registers again
    t.now += 2 * PROBE_MS - 1;
    expect(s.undoHeldOff(1)).toBe(true);
    expect(await s.beginUnload(U, 'sql', t.now, 60_000)).toBeNull();
    t.now += 1;
    expect(s.undoHeldOff(1)).toBe(false);
    expect(await s.beginUnload(U, 'sql', t.now, 60_000)).toBe(7);
  });

  // The simulation's seed 1534246: Redis restarted from an older snapshot, and the node's heartbeat was
  // the first call to find another server answering; no decision failed, so no outage ended. Its own
  // unloads the snapshot predates must read `unloading` (own-unloads.ts `sharedAgain`) as after an outage.
  it('tells onSharedAgain when a heartbeat, not a decision, found the state emptied or on another server', async () => {
    const clock: Clock = { now: () => 10_000, after: () => () => undefined };
    const { shared } = emptiedOnce();
    const s = new FailoverFleetStore(shared, silentLogger, { probeMs: PROBE_MS, logEveryMs: 60_000 }, clock);
    let told = 0;
    s.onSharedAgain = () => told++;
    await s.views([U]);
    expect(told).toBe(0);
    shared.onStateLost?.(); // the heartbeat's ServerSwitched (redis-store.ts `heartbeat`)
    expect(told).toBe(1);
  });
});
