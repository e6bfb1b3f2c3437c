import { LeaseHandle } from '../../src/lease';
import { silentLogger } from '../../src/log';
import { inFlightHere, joinUnderWay } from '../../src/router/in-flight-here';
import { FleetRuntime } from '../../src/runtime';

/**
 * The in-flight count a class bounded by `max_in_flight` judges (src/router/in-flight-here.ts):
 * the view's, or this process's own leases and joins under way when higher; nothing left behind.
 */
describe('in-flight count for max_in_flight', () => {
  const url = 'http://r:8000';
  let rt: FleetRuntime;
  beforeEach(() => {
    rt = new FleetRuntime({ log: silentLogger, seed: 1 });
  });
  afterEach(() => rt.stop());

  it('counts this process’s open leases and joins under way, the view’s count when higher, and forgets each once ended', async () => {
    const { lease } = await LeaseHandle.take(rt, url, null);
    expect(LeaseHandle.openOn(rt, url)).toBe(1);
    expect(inFlightHere(rt, url, 0, false)).toBe(1);
    // Other nodes' requests, in a shared store's view.
    expect(inFlightHere(rt, url, 5, false)).toBe(5);
    // The request's own guessed lease is not counted against it.
    expect(inFlightHere(rt, url, 0, true)).toBe(0);
    const joined = joinUnderWay(rt, url);
    expect(inFlightHere(rt, url, 0, false)).toBe(2);
    // Ended once, however often told.
    joined();
    joined();
    expect(inFlightHere(rt, url, 0, false)).toBe(1);
    expect(inFlightHere(rt, 'http://other:8000', 0, false)).toBe(0);
    await lease.release(200);
    expect(LeaseHandle.openOn(rt, url)).toBe(0);
    expect(inFlightHere(rt, url, 0, false)).toBe(0);
  });

  it('forgets a lease aged out (its log phase never came)', async () => {
    const { lease } = await LeaseHandle.take(rt, url, null);
    lease.agedOut();
    lease.agedOut();
    expect(LeaseHandle.openOn(rt, url)).toBe(0);
  });
});
