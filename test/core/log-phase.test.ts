/**
 * The log phase (src/router/log-phase.ts), the plugin's only way a proxied request's lease goes
 * back: once, where it was taken, whatever status Kong reports. A second give-back is an error
 * the caller sees (LeaseNotOpen), never a store call the store would ignore silently.
 */
import type { ReplicaApi } from '../../src/backends/replica-api';
import { systemClock, VirtualClock, type Clock } from '../../src/clock';
import { LeaseHandle, LeaseNotOpen } from '../../src/lease';
import { silentLogger } from '../../src/log';
import { FleetRuntime } from '../../src/runtime';
import { logPhase, releaseLease, type DecisionRecord } from '../../src/router/log-phase';
import { SPEC, U } from '../helpers/runtime-harness';
import { asRoundTrips } from '../helpers/round-trips';

/**
 * A memory-store runtime with one replica holding adapter 'a'; counts the store's releases and
 * the replica's scrapes (which fail: no network here).
 */
async function runtimeWithReplica(
  o: { scrape?: () => Promise<never>; inCall?: boolean; clock?: Clock } = {},
) {
  const scrapes: string[] = [];
  const api: ReplicaApi = {
    scrape: async (spec) => {
      scrapes.push(spec.url);
      if (o.scrape) return o.scrape();
      throw new Error('not reached in this test');
    },
    loadAdapter: async () => {
      throw new Error('no loads in this test');
    },
    unloadAdapter: async () => {
      throw new Error('no unloads in this test');
    },
  };
  const rt = new FleetRuntime({ log: silentLogger, seed: 1, api, clock: o.clock });
  await rt.store.upsertReplica(SPEC);
  await rt.store.applySnapshot(U, {
    at: rt.clock.now(),
    ok: true,
    load: { running: 0, waiting: 0, kvUsage: 0.1, activeAdapters: [], malformedLines: 0 },
    registry: [{ name: 'a', path: '/adapters/a' }],
    managed: () => true,
  });
  const releases: string[] = [];
  if (!o.inCall) asRoundTrips(rt.store);
  const release = rt.store.release.bind(rt.store);
  rt.store.release = (id, now, status) => {
    releases.push(id);
    return release(id, now, status);
  };
  return { rt, releases, scrapes };
}

async function admitted(rt: FleetRuntime): Promise<DecisionRecord> {
  const { lease } = await LeaseHandle.take(rt, U, 'a');
  return { lease: lease.id, replica: U, stage: 'holder', adapter: 'a' };
}

const inFlight = async (rt: FleetRuntime) => (await rt.store.views([U], { name: 'a' }))[0]!.adapter?.inFlight;
const health = async (rt: FleetRuntime) => (await rt.store.views([U], { name: 'a' }))[0]!.health;

describe('the log phase gives a lease back once', () => {
  let rt: FleetRuntime | undefined;
  afterEach(() => rt?.stop());

  it.each([200, 500, 404, undefined])(
    'status %p: one store release, and a second log phase for the same lease throws LeaseNotOpen',
    async (status) => {
      const r = await runtimeWithReplica();
      rt = r.rt;
      const record = await admitted(rt);
      expect(await inFlight(rt)).toBe(1);
      const source = jest.fn(async () => 'service');
      await logPhase(rt, record, status, source);
      expect(r.releases).toEqual([record.lease]);
      expect(await inFlight(rt)).toBe(0);
      expect(LeaseHandle.find(record.lease)).toBeUndefined();
      // Kong's source is read only for a 5xx (whose answer it was); a 404 reads the replica's registry afresh.
      expect(source).toHaveBeenCalledTimes(status === 500 ? 1 : 0);
      expect(r.scrapes).toEqual(status === 404 ? [U] : []);
      await expect(logPhase(rt, record, status, source)).rejects.toThrow(LeaseNotOpen);
      expect(r.releases).toEqual([record.lease]);
    },
  );

  it.each([502, 504])(
    "Kong's own %p: released once, then the replica is down for routing at once",
    async (status) => {
      const r = await runtimeWithReplica();
      rt = r.rt;
      const record = await admitted(rt);
      expect(await health(rt)).toBe('up');
      await logPhase(rt, record, status, async () => 'error');
      expect(r.releases).toEqual([record.lease]);
      expect(await inFlight(rt)).toBe(0);
      expect(await health(rt)).toBe('down');
      await expect(logPhase(rt, record, status, async () => 'error')).rejects.toThrow(LeaseNotOpen);
      expect(r.releases).toEqual([record.lease]);
    },
  );

  it("a replica's own 502 (source service) releases once and leaves health to the polls", async () => {
    const r = await runtimeWithReplica();
    rt = r.rt;
    const record = await admitted(rt);
    await logPhase(rt, record, 502, async () => 'service');
    expect(r.releases).toEqual([record.lease]);
    expect(await health(rt)).toBe('up');
  });

  it('the release that leaves its adapter idle wakes the requests waiting for room at once', async () => {
    const r = await runtimeWithReplica();
    rt = r.rt;
    const first = await admitted(rt);
    const second = await admitted(rt);
    const woken: string[] = [];
    // On a clock that never moves: only a notify wakes it, never the fallback.
    const waitForRoom = (tag: string) =>
      void rt!.manager.roomChanged.wait(new VirtualClock(), 60_000).then(() => woken.push(tag));
    waitForRoom('after first');
    await logPhase(rt, first, 200, async () => 'service');
    await new Promise((done) => setImmediate(done));
    expect(woken).toEqual([]); // 'a' still has a request in flight
    await logPhase(rt, second, 200, async () => 'service');
    await new Promise((done) => setImmediate(done));
    expect(woken).toEqual(['after first']);
  });

  it('a lease the store no longer holds (reclaimed there by age) ends here quietly, waking no one', async () => {
    const r = await runtimeWithReplica();
    rt = r.rt;
    const record = await admitted(rt);
    // The store's side ends first (its lease sweep); the handle here is still open.
    expect(await rt.store.release(record.lease, rt.clock.now())).toBeDefined();
    const woken: string[] = [];
    void rt.manager.roomChanged.wait(new VirtualClock(), 60_000).then(() => woken.push('waiter'));
    await logPhase(rt, record, 404, async () => 'service');
    await new Promise((done) => setImmediate(done));
    expect(r.releases).toEqual([record.lease, record.lease]);
    expect(LeaseHandle.find(record.lease)).toBeUndefined();
    expect(r.scrapes).toEqual([]); // no release there: no 404 re-read either
    expect(woken).toEqual([]);
  });

  it('after a record change, the release wakes the waiters of the runtime deciding now too', async () => {
    const r = await runtimeWithReplica();
    rt = r.rt;
    const record = await admitted(rt);
    const next = new FleetRuntime({ log: silentLogger, seed: 2 });
    try {
      rt.successor = next; // what retire() sets first: decisions now run on `next`
      const woken: string[] = [];
      const waitOn = (on: FleetRuntime, tag: string) =>
        void on.manager.roomChanged.wait(new VirtualClock(), 60_000).then(() => woken.push(tag));
      waitOn(rt, 'old');
      waitOn(next, 'current');
      await logPhase(rt, record, 200, async () => 'service');
      await new Promise((done) => setImmediate(done));
      expect(woken.sort()).toEqual(['current', 'old']);
    } finally {
      rt.successor = null;
      next.stop();
    }
  });

  it('a lease this process does not hold open throws LeaseNotOpen and calls no store', async () => {
    const r = await runtimeWithReplica();
    rt = r.rt;
    const record: DecisionRecord = { lease: 'unknown-lease', replica: U, stage: 'holder', adapter: 'a' };
    await expect(logPhase(rt, record, 200, async () => 'service')).rejects.toThrow(LeaseNotOpen);
    expect(r.releases).toEqual([]);
  });
});

/** Scrapes that stay under way until the test ends them (each fails: no registry is read). */
function heldScrapes() {
  const pending: (() => void)[] = [];
  return {
    pending,
    scrape: () =>
      new Promise<never>((_, fail) => pending.push(() => fail(new Error('scrape ended by the test')))),
  };
}

/** Turns of the event loop until `done` (bounded). */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 100 && !done(); i++) await new Promise((r) => setImmediate(r));
}

describe("the log phase's re-read after a 404", () => {
  let rt: FleetRuntime | undefined;
  afterEach(() => rt?.stop());

  it('on a store answered by round trips, the log phase ends only once the registry was read afresh', async () => {
    const held = heldScrapes();
    const r = await runtimeWithReplica({ scrape: held.scrape });
    rt = r.rt;
    const record = await admitted(rt);
    let ended = false;
    // A promise here (a store answered by round trips); answered in the call only in process.
    const logged = Promise.resolve(logPhase(rt, record, 404, async () => 'service')).then(
      () => (ended = true),
    );
    await until(() => held.pending.length > 0);
    expect(r.scrapes).toEqual([U]);
    await until(() => ended);
    expect(ended).toBe(false);
    held.pending[0]!();
    await logged;
    expect(ended).toBe(true);
  });

  it('a 404 while a poll of the replica is under way reads the registry again after that poll', async () => {
    const held = heldScrapes();
    const r = await runtimeWithReplica({ scrape: held.scrape });
    rt = r.rt;
    const record = await admitted(rt);
    // Begun before the 404: it may have read the registry before the adapter was lost.
    const earlier = rt.poller.refreshUrl(U).catch(() => undefined);
    await until(() => held.pending.length > 0);
    const logged = logPhase(rt, record, 404, async () => 'service');
    held.pending[0]!();
    await earlier;
    await until(() => held.pending.length > 1);
    expect(r.scrapes).toEqual([U, U]);
    held.pending[1]!();
    await logged;
  });

  it("a 404 on a base model's request re-reads nothing (no adapter there to have lost)", async () => {
    const r = await runtimeWithReplica();
    rt = r.rt;
    const { lease } = await LeaseHandle.take(rt, U, null);
    await logPhase(
      rt,
      { lease: lease.id, replica: U, stage: 'holder', adapter: null },
      404,
      async () => 'service',
    );
    expect(await inFlight(rt)).toBe(0);
    expect(r.scrapes).toEqual([]);
  });
});

describe('in process', () => {
  let rt: FleetRuntime | undefined;
  afterEach(() => rt?.stop());

  it('a release is answered in the call: no promise, the in-flight count back before it returns', async () => {
    const r = await runtimeWithReplica({ inCall: true });
    rt = r.rt;
    const record = await admitted(rt);
    expect(releaseLease(LeaseHandle.find(record.lease)!, 200, true)).toBeUndefined();
    expect(rt.store.viewsNow!([U], { name: 'a' })[0]!.adapter?.inFlight).toBe(0);
  });

  it("a base model's request ending tells the unseen hold of no adapter, not even one named null", async () => {
    const r = await runtimeWithReplica({ inCall: true });
    rt = r.rt;
    const base = (await LeaseHandle.take(rt, U, null)).lease;
    const named = (await LeaseHandle.take(rt, U, 'null')).lease;
    // A poll begun while both were open.
    const polled = Math.max(base.openedMono, named.openedMono);
    const word = rt.manager.replicaWord;
    releaseLease(base, 200, true, polled + 1);
    expect(word.servedEndedSince(U, 'null', polled)).toBe(false);
    releaseLease(named, 200, true, polled + 1);
    expect(word.servedEndedSince(U, 'null', polled)).toBe(true);
  });
  it('each request ending is told once: the word keeps the last 8 of a replica and adapter', async () => {
    // The system clock, moved on by the test: a poll begun between two leases' openings.
    let shift = 0;
    const clock: Clock = {
      now: () => systemClock.now() + shift,
      after: (ms, fn) => systemClock.after(ms, fn),
    };
    const r = await runtimeWithReplica({ inCall: true, clock });
    rt = r.rt;
    const long = (await LeaseHandle.take(rt, U, 'a')).lease;
    const polled = long.openedMono + 5_000;
    shift += 10_000;
    const later = [];
    for (let i = 0; i < 4; i++) later.push((await LeaseHandle.take(rt, U, 'a')).lease);
    // The long request ended first, after the poll began; the four later ones opened after it began.
    releaseLease(long, 200, true, polled + 10_000);
    later.forEach((l, i) => releaseLease(l, 200, true, polled + 20_000 + i));
    expect(rt.manager.replicaWord.servedEndedSince(U, 'a', polled)).toBe(true);
  });
});
