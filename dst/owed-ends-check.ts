/**
 * The lock ends a runtime retired for other state owes the old state (failover-store.ts `leave`):
 * a peer not yet moved (Kong pushes a `redis` record to its nodes in turn) reads the adapter
 * `loading` or `unloading` there until the lock's TTL (8 s for a load) unless the retired store
 * sends them once the old state answers. Judged only where that store must have sent them: its
 * node's links whole long enough for a ping and the replay, and in time for its leave's last try.
 */
import type { FailoverFleetStore } from '../src/fleet/redis/failover-store';
import type { NodeProcesses } from './node-processes';
import type { RedisModel } from './redis-model';
import { PROBE_MS } from './world-timings';

export const OWED_ENDS_INVARIANT =
  'a runtime retired for other state sends the old state the lock ends it owes';

/**
 * From the last fault (a link healed): a ping that timed out just before (500 ms), a probe's sleep,
 * the ping and the replay's trips, and slack.
 */
export const OWED_ENDS_BOUND_MS = 2 * PROBE_MS + 1000;

/** An end as the store keeps it (ended-locks.ts, private: read here, never changed). */
interface OwedEnd {
  op: 'load' | 'unload';
  url: string;
  adapter: string;
  fence: number;
  until: number;
}

/**
 * The first owed end held in an old state past the bound, described, or undefined. When each
 * retired store began to leave, and for how long it may try: `NodeProcesses.leaving`.
 */
export function owedEndHeld(
  now: number,
  lastFaultAt: number,
  nodes: NodeProcesses,
  redis: readonly RedisModel[],
): string | undefined {
  if (now - lastFaultAt <= OWED_ENDS_BOUND_MS) return undefined;
  const peersOn = new Set(nodes.procs.filter((p) => p.alive).map((p) => p.db));
  for (const p of nodes.procs) {
    if (!p.alive) continue;
    for (const rt of p.runtimes) {
      const db = nodes.prefixDb.get(rt.leasePrefix);
      if (rt === p.rt || db === undefined || db === p.db || !peersOn.has(db)) continue;
      const store = rt.store as FailoverFleetStore;
      const leave = nodes.leaving.get(store);
      // Still draining: its probe's recovery sends them. Given up: the old state stayed unreachable
      // until (nearly) its last try, so the locks expire by age.
      if (!leave || lastFaultAt > leave.at + leave.maxMs - OWED_ENDS_BOUND_MS) continue;
      const ends = (store as unknown as { endedLocks: { ended: OwedEnd[] } }).endedLocks.ended;
      for (const e of ends) {
        // Near its TTL (on the node's clock) it expires there anyway.
        if (e.until - p.clock.now() < PROBE_MS) continue;
        const life = redis[db]!.lockLife(e.fence);
        if (life && life.endSeq === undefined)
          return `db ${db}: ${e.adapter} ${e.op === 'load' ? 'loading' : 'unloading'} on ${e.url} (fence ${e.fence}) ${Math.round(now - lastFaultAt)} ms after the last fault healed, its end owed by ${rt.leasePrefix}, leaving since ${Math.round(leave.at)} ms, with a node still on that state`;
      }
    }
  }
  return undefined;
}
