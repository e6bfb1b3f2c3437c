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
    expect(inFlightHere(rt, url, 0, undefined)).toBe(1);
    // Other nodes' requests, in a shared store's view.
    expect(inFlightHere(rt, url, 5, undefined)).toBe(5);
    // The request's own guessed lease is not counted against it.
    expect(inFlightHere(rt, url, 0, lease)).toBe(0);
    const joined = joinUnderWay(rt, url);
    expect(inFlightHere(rt, url, 0, undefined)).toBe(2);
    // Ended once, however often told.
    joined();
    joined();
    expect(inFlightHere(rt, url, 0, undefined)).toBe(1);
    expect(inFlightHere(rt, 'http://other:8000', 0, undefined)).toBe(0);
    await lease.release(200);
    expect(LeaseHandle.openOn(rt, url)).toBe(0);
    expect(inFlightHere(rt, url, 0, undefined)).toBe(0);
  });

  // dst seed 176 (the max_in_flight check, dst/bound-check.ts): another node's request in the view
  // (1) and this process's decision joining the same replica (1): the higher of the two said 1, and
  // a second batch request decided at the same moment joined at max_in_flight 2 (3 in flight).
  it("adds this process's joins under way to the view's count: no view can show them", () => {
    const joined = joinUnderWay(rt, url);
    expect(inFlightHere(rt, url, 1, undefined)).toBe(2);
    joined();
    expect(inFlightHere(rt, url, 1, undefined)).toBe(1);
  });

  it("adds this process's leases the view could not show (given after it was read), not those it showed", async () => {
    const seen = await LeaseHandle.take(rt, url, null);
    const mark = LeaseHandle.viewsMark();
    // Views read now: another node's lease and `seen`.
    const after = await LeaseHandle.take(rt, url, null);
    expect(inFlightHere(rt, url, 2, undefined, mark)).toBe(3);
    // The request's own guessed lease, given after the views: not counted against it.
    expect(inFlightHere(rt, url, 2, after.lease, mark)).toBe(2);
    // A lease whose store has not answered yet may be missing from any view.
    const pending = LeaseHandle.take(rt, url, null);
    expect(inFlightHere(rt, url, 2, undefined, LeaseHandle.viewsMark())).toBe(3);
    await Promise.all([
      seen.lease.release(200),
      after.lease.release(200),
      (await pending).lease.release(200),
    ]);
    expect(inFlightHere(rt, url, 0, undefined, mark)).toBe(0);
  });

  // A request held at its bound reads the views again (placement.ts): its own guessed lease, answered
  // before that read began, is in them now. Counted there, the request judged itself one of the
  // bound's and waited up to half its objective on a replica with room (max_in_flight 1: alone).
  it("does not count the request's own lease against it in views read after it was answered", async () => {
    const own = await LeaseHandle.take(rt, url, null);
    const mark = LeaseHandle.viewsMark();
    // Views read now: the own lease and another node's.
    expect(inFlightHere(rt, url, 2, own.lease, mark)).toBe(1);
    expect(inFlightHere(rt, url, 1, own.lease, mark)).toBe(0);
    // On another replica it is no concern of this one's count.
    expect(inFlightHere(rt, 'http://other:8000', 1, own.lease, mark)).toBe(1);
    await own.lease.release(200);
  });

  it('forgets a lease whose acquire threw (given back in its catch): not counted as unanswered forever', async () => {
    const mark = LeaseHandle.viewsMark();
    jest.spyOn(rt.store, 'acquire').mockRejectedValueOnce(new Error('store down'));
    await expect(LeaseHandle.take(rt, url, null)).rejects.toThrow('store down');
    expect(LeaseHandle.openOn(rt, url)).toBe(0);
    expect(LeaseHandle.unseenOn(rt, url, mark)).toBe(0);
    expect(inFlightHere(rt, url, 0, undefined, mark)).toBe(0);
  });

  it('forgets a lease aged out (its log phase never came)', async () => {
    const { lease } = await LeaseHandle.take(rt, url, null);
    lease.agedOut();
    lease.agedOut();
    expect(LeaseHandle.openOn(rt, url)).toBe(0);
  });
});
