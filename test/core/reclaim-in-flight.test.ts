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
function loggingShared(): {
  shared: SharedStore;
  calls: string[];
  answer: () => void;
  retakeFails: { value: boolean };
  /** While set, each registration waits until the test lets it go (`held`, in call order). */
  hold: { value: boolean; held: (() => void)[] };
} {
  const calls: string[] = [];
  const retakeFails = { value: false };
  const hold = { value: false, held: [] as (() => void)[] };
  let answer = () => undefined as void;
  const known = {
    liveNodes: 3,
    currentEpoch: 'e2',
    onStateLost: null,
    onRemoteChange: null,
    takeStateLost: () => false,
    upsertReplica: async () => {
      if (hold.value) await new Promise<void>((go) => hold.held.push(go));
      calls.push('register');
    },
    acquire: (lease: Lease) => {
      calls.push(`take ${lease.id}`);
      return new Promise<undefined>((resolve) => (answer = () => resolve(undefined)));
    },
    retake: async (leases: Lease[]) => {
      if (retakeFails.value) throw new Error('connection lost');
      for (const l of leases) calls.push(`take ${l.id}`);
      return [];
    },
  } as Record<string, unknown>;
  const shared = new Proxy(known, {
    get: (o, k: string) => (k in o ? o[k] : async () => undefined),
  }) as unknown as SharedStore;
  return { shared, calls, answer: () => answer(), retakeFails, hold };
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

  // recovering-store.ts's mutation run (docs/reliability/mutation-testing.md): that take failing
  // was swallowed, and the lease stayed counted nowhere while the node went on sharing.
  it('decides alone when that take fails: the next probe takes its leases again', async () => {
    const { shared, answer, retakeFails } = loggingShared();
    const s = new FailoverFleetStore(shared, silentLogger, { probeMs: 1000, logEveryMs: 60_000 });
    await s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    const acquired = s.acquire({ id: 'n0g0-4', url: U, adapter: 'sql', at: 968 });
    shared.onStateLost!();
    for (let i = 0; i < 20; i++) await Promise.resolve();
    retakeFails.value = true;
    answer();
    await acquired;
    expect(s.mode()).toBe('local');
    await s.close();
  });

  it('takes the lease again when a second reclaim began during its acquire, itself begun during the first', async () => {
    const { shared, calls, answer } = loggingShared();
    const s = new FailoverFleetStore(shared, silentLogger, { probeMs: 1000, logEveryMs: 60_000 });
    await s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    shared.onStateLost!(); // the first reclaim, under way as the acquire begins
    const acquired = s.acquire({ id: 'n0g0-5', url: U, adapter: 'sql', at: 968 });
    for (let i = 0; i < 20; i++) await Promise.resolve();
    shared.onStateLost!(); // emptied again: a second reclaim, its restore before the reply too
    for (let i = 0; i < 20; i++) await Promise.resolve();
    answer();
    await acquired;
    expect(calls.slice(calls.lastIndexOf('register'))).toContain('take n0g0-5');
    await s.close();
  });

  it('an emptying told while a reclaim registers runs that reclaim again, not a second one beside it', async () => {
    const { shared, calls, answer, hold } = loggingShared();
    const s = new FailoverFleetStore(shared, silentLogger, { probeMs: 1000, logEveryMs: 60_000 });
    await s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    hold.value = true;
    shared.onStateLost!(); // a reclaim, its registration held
    for (let i = 0; i < 20; i++) await Promise.resolve();
    shared.onStateLost!(); // emptied again while it registers
    for (let i = 0; i < 20; i++) await Promise.resolve();
    hold.held.shift()!(); // the first registration lands; the next one is held
    for (let i = 0; i < 20; i++) await Promise.resolve();
    // Begun now: the reclaim still runs (registering again), so its lease is taken again after it.
    const acquired = s.acquire({ id: 'n0g0-6', url: U, adapter: 'sql', at: 968 });
    for (let i = 0; i < 20; i++) await Promise.resolve();
    hold.value = false;
    for (const go of hold.held.splice(0)) go();
    for (let i = 0; i < 20; i++) await Promise.resolve();
    answer();
    await acquired;
    expect(calls.slice(calls.lastIndexOf('register'))).toContain('take n0g0-6');
    await s.close();
  });
});
