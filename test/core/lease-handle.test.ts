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
