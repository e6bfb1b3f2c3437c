/**
 * A waiting request's lease kept young (src/router/waiting-lease.ts): taken afresh once half
 * `lease_max_age_ms` old, the old one given back after, nothing done while young, and a failed
 * take neither loses the lease nor is tried again at every wake.
 */
import { VirtualClock } from '../../src/clock';
import { LeaseHandle } from '../../src/lease';
import { silentLogger } from '../../src/log';
import { WaitingLease } from '../../src/router/waiting-lease';
import { FleetRuntime } from '../../src/runtime';

const U = 'http://10.0.0.1:8000';
const MAX_AGE_MS = 4000;

function runtime(clock: VirtualClock): FleetRuntime {
  return new FleetRuntime({ clock, log: silentLogger, poller: { leaseMaxAgeMs: MAX_AGE_MS } });
}

it('nothing while young; half a max age old, a fresh lease first, then the old one given back', async () => {
  const clock = new VirtualClock();
  const rt = runtime(clock);
  const first = (await LeaseHandle.take(rt, U, 'x')).lease;
  const told: string[] = [];
  const waiting = new WaitingLease(rt, first, MAX_AGE_MS, (l) => told.push(l.id));
  await clock.run(MAX_AGE_MS / 2 - 1);
  expect(waiting.keep()).toBeUndefined();
  await clock.run(MAX_AGE_MS / 2);
  const kept = waiting.keep();
  // Until the take is answered, the old lease holds the adapter.
  expect(waiting.current).toBe(first);
  await kept;
  const fresh = waiting.current;
  expect(fresh).not.toBe(first);
  expect(told).toEqual([fresh.id]);
  expect(fresh.lease).toMatchObject({ url: U, adapter: 'x', at: MAX_AGE_MS / 2 });
  expect(LeaseHandle.find(first.id)).toBeUndefined();
  expect(LeaseHandle.find(fresh.id)).toBe(fresh);
  // Young again: nothing until its own half max age.
  expect(waiting.keep()).toBeUndefined();
  await fresh.release(200);
  rt.stop();
});

it('a failed take keeps the old lease and is not tried again for an eighth of a max age', async () => {
  const clock = new VirtualClock();
  const rt = runtime(clock);
  const first = (await LeaseHandle.take(rt, U, 'x')).lease;
  const waiting = new WaitingLease(rt, first, MAX_AGE_MS, () => {});
  await clock.run(MAX_AGE_MS / 2);
  const acquire = rt.store.acquire.bind(rt.store);
  let takes = 0;
  rt.store.acquire = async () => {
    takes++;
    throw new Error('Redis is away');
  };
  await waiting.keep();
  expect(waiting.current).toBe(first);
  expect(LeaseHandle.find(first.id)).toBe(first);
  await clock.run(clock.now() + MAX_AGE_MS / 8 - 1);
  expect(waiting.keep()).toBeUndefined();
  rt.store.acquire = acquire;
  await clock.run(clock.now() + 1);
  await waiting.keep();
  expect(takes).toBe(1);
  expect(waiting.current).not.toBe(first);
  await waiting.current.release(200);
  rt.stop();
});

it('asked again while a fresh lease is being taken (by the load it joined, then by its own wait): one take', async () => {
  const clock = new VirtualClock();
  const rt = runtime(clock);
  const first = (await LeaseHandle.take(rt, U, 'x')).lease;
  const told: string[] = [];
  const waiting = new WaitingLease(rt, first, MAX_AGE_MS, (l) => told.push(l.id));
  await clock.run(MAX_AGE_MS / 2);
  const byLoad = waiting.keep();
  const byWait = waiting.keep();
  expect(byWait).toBe(byLoad);
  expect(waiting.renewing).toBe(byLoad);
  await byWait;
  expect(waiting.renewing).toBeUndefined();
  expect(told).toEqual([waiting.current.id]);
  expect(LeaseHandle.find(first.id)).toBeUndefined();
  await waiting.current.release(200);
  rt.stop();
});
