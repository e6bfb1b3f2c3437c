/**
 * Unit test of FailoverFleetStore's `reclaim` (src/fleet/redis/failover-store.ts) against a lease
 * whose shared acquire is under way while it runs: the shared side is a stand-in that logs each
 * call and answers an acquire when told. The simulation's seed 609813: a FLUSHALL at 965 ms, node
 * 0 found it and began registering its replicas again; its acquire for `sql` on replica-1 reached
 * the emptied state at 968 ms, before the registration (counted nowhere), and its reply came
 * after the restore had read the leases held (970 ms), so nobody took it again: the same node's
 * trim unloaded `sql` at 3189 ms with that request still on its way.
 */
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import type { SharedStore } from '../../src/fleet/redis/shared-store';
import type { Lease } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';

const U = 'http://replica-1:8000';

/** A shared store that logs registrations and takes, its acquire answered only by `answer`. */
function loggingShared(): { shared: SharedStore; calls: string[]; answer: () => void } {
  const calls: string[] = [];
  let answer = () => undefined as void;
  const known = {
    liveNodes: 3,
    currentEpoch: 'e2',
    onStateLost: null,
    onRemoteChange: null,
    takeStateLost: () => false,
    upsertReplica: async () => void calls.push('register'),
    acquire: (lease: Lease) => {
      calls.push(`take ${lease.id}`);
      return new Promise<undefined>((resolve) => (answer = () => resolve(undefined)));
    },
    retake: async (leases: Lease[]) => {
      for (const l of leases) calls.push(`take ${l.id}`);
      return [];
    },
  } as Record<string, unknown>;
  const shared = new Proxy(known, {
    get: (o, k: string) => (k in o ? o[k] : async () => undefined),
  }) as unknown as SharedStore;
  return { shared, calls, answer: () => answer() };
}

describe('FailoverFleetStore: the shared state found emptied while an acquire is under way', () => {
  it('takes the lease again once its replicas are registered, though the restore ran before its reply', async () => {
    const { shared, calls, answer } = loggingShared();
    const s = new FailoverFleetStore(shared, silentLogger, { probeMs: 1000, logEveryMs: 60_000 });
    await s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    const lease: Lease = { id: 'n0g0-3', url: U, adapter: 'sql', at: 968 };
    const acquired = s.acquire(lease); // reaches the emptied state before it is registered again
    shared.onStateLost!(); // a heartbeat's reply says it was emptied: register again, restore leases
    for (let i = 0; i < 20; i++) await Promise.resolve(); // the reclaim runs to its end
    answer();
    await acquired;
    const registered = calls.lastIndexOf('register');
    expect(calls.slice(registered)).toContain('take n0g0-3');
  });
});
