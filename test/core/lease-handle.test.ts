/**
 * The lease handle's own bookkeeping: a lease forgotten once every store has reclaimed it, per
 * runtime (each has its own `lease_max_age_ms`).
 */
import { VirtualClock } from '../../src/clock';
import { LeaseHandle } from '../../src/lease';
import { silentLogger } from '../../src/log';
import { FleetRuntime } from '../../src/runtime';

const U = 'http://10.0.0.1:8000';

function runtime(clock: VirtualClock, leaseMaxAgeMs: number): FleetRuntime {
  return new FleetRuntime({ clock, log: silentLogger, poller: { leaseMaxAgeMs } });
}

it("one runtime's young lease does not hide another runtime's reclaimed ones from the sweep", async () => {
  const clock = new VirtualClock();
  const slow = runtime(clock, 3_600_000);
  const fast = runtime(clock, 1000);
  // Taken first, on the runtime whose leases live long: young for an hour.
  const young = (await LeaseHandle.take(slow, U, null)).lease;
  // Taken next, on the runtime whose store reclaims after 4 s (LEASE_CEILING x 1 s).
  const old = (await LeaseHandle.take(fast, U, null)).lease;
  await clock.run(10_000);
  // Any take sweeps: the fast runtime's lease is past every store's reclaim age.
  const next = (await LeaseHandle.take(fast, U, null)).lease;
  expect(LeaseHandle.find(old.id)).toBeUndefined();
  expect(LeaseHandle.find(young.id)).toBe(young);
  await young.release(200);
  await next.release(200);
  slow.stop();
  fast.stop();
});

// Mutation testing (StrykerJS on src/lease.ts, docs/reliability/mutation-testing.md) let these through the
// suites that use the handle: each is a path no request-level test tells apart.
describe('the handle on its own paths', () => {
  it('an acquire that fails after counting gives the lease back once, and forgets it', async () => {
    const rt = runtime(new VirtualClock(), 1000);
    const released: string[] = [];
    const release = rt.store.release.bind(rt.store);
    rt.store.release = (id, now, status) => {
      released.push(id);
      return release(id, now, status);
    };
    const acquire = rt.store.acquire.bind(rt.store);
    let taken = '';
    rt.store.acquire = async (l) => {
      taken = l.id;
      await acquire(l);
      throw new Error('the connection dropped after the script ran');
    };
    const ended = jest.spyOn(rt, 'leaseEnded');
    await expect(LeaseHandle.take(rt, U, 'x')).rejects.toThrow(/connection dropped/);
    expect(released).toEqual([taken]);
    expect(ended).toHaveBeenCalledTimes(1);
    expect(LeaseHandle.find(taken)).toBeUndefined();
    rt.stop();
  });

  it('a lease aged out twice ends once on its runtime (a replaced runtime drains on that count)', async () => {
    const rt = runtime(new VirtualClock(), 1000);
    const { lease } = await LeaseHandle.take(rt, U, null);
    const ended = jest.spyOn(rt, 'leaseEnded');
    lease.agedOut();
    lease.agedOut();
    expect(ended).toHaveBeenCalledTimes(1);
    expect(LeaseHandle.find(lease.id)).toBeUndefined();
    rt.stop();
  });

  it("a runtime's other leases stay in the sweep's reach when one of them is given back", async () => {
    const clock = new VirtualClock();
    const rt = runtime(clock, 1000);
    const lost = (await LeaseHandle.take(rt, U, null)).lease;
    const done = (await LeaseHandle.take(rt, U, null)).lease;
    await done.release(200);
    // The lost lease's log phase never comes: past every store's reclaim age, the next take
    // forgets it, or the process would keep one entry per such request.
    await clock.run(10_000);
    const next = (await LeaseHandle.take(rt, U, null)).lease;
    expect(LeaseHandle.find(lost.id)).toBeUndefined();
    await next.release(200);
    rt.stop();
  });

  it('counts as reclaimed from exactly the age every store reclaims it at', async () => {
    const clock = new VirtualClock();
    const rt = runtime(clock, 1000);
    const { lease } = await LeaseHandle.take(rt, U, null);
    const at = clock.now();
    expect(lease.reclaimedAfterMs).toBe(4000);
    expect(lease.reclaimedBy(at + 3999)).toBe(false);
    expect(lease.reclaimedBy(at + 4000)).toBe(true);
    await lease.release(200);
    await expect(lease.release(200)).rejects.toThrow(/is not open/);
    rt.stop();
  });

  it('tells the work model a request completed only on a 2xx (its decode rate learns from those)', async () => {
    const rt = runtime(new VirtualClock(), 1000);
    rt.predictsWork = true;
    const work = jest.spyOn(rt.work, 'release');
    for (const status of [undefined, 199, 200, 299, 300, 500]) {
      const { lease } = await LeaseHandle.take(rt, U, null);
      await lease.release(status);
    }
    expect(work.mock.calls.map((c) => c[2])).toEqual([false, false, true, true, false, false]);
    rt.predictsWork = false;
    const { lease } = await LeaseHandle.take(rt, U, null);
    await lease.release(200);
    expect(work).toHaveBeenCalledTimes(6);
    rt.stop();
  });
});
