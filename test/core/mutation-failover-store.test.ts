/**
 * Unit test of FailoverFleetStore's recovery (src/fleet/redis/failover-store.ts, one module),
 * written against the survivors of its mutation run (docs/reliability.md#mutation-testing): what
 * a node hands the shared store after deciding alone (its replicas, its leases, its missed
 * releases and lock ends, a prune of what it released) and after finding the state emptied, and
 * that it shares decisions again only once all of it is there. The shared side is the in-process
 * store with a switch that fails every call (as in failover-clock.test.ts) and a recording
 * `prune`; the clock is virtual, so a probe runs when the test says.
 */
import { VirtualClock } from '../../src/clock';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import type { SharedStore } from '../../src/fleet/redis/shared-store';
import type { Lease } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';
import { snapshotWithA } from './helpers';

const U = 'http://10.0.0.1:8000';
const PROBE = 1_000;
const lease = (id: string, at = 2): Lease => ({ id, url: U, adapter: 'a', at });

/** The shared side: an in-process store that fails every call while `down`, recording prunes. */
function fakeShared() {
  const down = { value: false };
  const lost = { value: false };
  const prunes: string[][] = [];
  let inner = new MemoryFleetStore();
  const extra = {
    ping: async () => 'PONG',
    prune: async (held: () => string[]) => {
      prunes.push(held());
      return 0;
    },
    takeStateLost: () => {
      const was = lost.value;
      lost.value = false;
      return was;
    },
    onStateLost: null as (() => void) | null,
  };
  const store = new Proxy(extra, {
    get(target, key) {
      if (key === 'onStateLost') return target.onStateLost;
      const own = key in target ? (target as Record<string | symbol, unknown>)[key] : undefined;
      const v = own ?? (Reflect.get(inner, key, inner) as unknown);
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        if (down.value && key !== 'takeStateLost') return Promise.reject(new Error('shared store down'));
        return (v as (...a: unknown[]) => unknown).apply(own ? target : inner, args);
      };
    },
    set(target, key, value) {
      if (key === 'onStateLost') target.onStateLost = value as (() => void) | null;
      return true;
    },
  }) as unknown as SharedStore;
  return {
    store,
    down,
    lost,
    prunes,
    inner: () => inner,
    /** The shared state emptied (a restart without persistence, FLUSHALL). */
    empty: () => {
      inner = new MemoryFleetStore();
    },
  };
}

async function setup() {
  const clock = new VirtualClock();
  const sh = fakeShared();
  const s = new FailoverFleetStore(sh.store, silentLogger, { probeMs: PROBE, logEveryMs: 60_000 }, clock);
  await s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  await s.applySnapshot(U, snapshotWithA(1));
  /** Cuts the shared store off and makes a decision notice it. */
  const cut = async () => {
    sh.down.value = true;
    await s.views([U]);
    expect(s.mode()).toBe('local');
  };
  /** Brings it back and lets the next probe run. */
  const back = async () => {
    sh.down.value = false;
    await clock.run(clock.now() + PROBE);
  };
  return { clock, sh, s, cut, back };
}

const sharedInFlight = async (store: MemoryFleetStore) => (await store.views([U], { name: 'a' }))[0];

describe('FailoverFleetStore.recover', () => {
  it('registers the replicas again, moves the local leases there and shares again', async () => {
    const { sh, s, cut, back } = await setup();
    await cut();
    sh.empty(); // came back empty
    await s.acquire(lease('L1'));
    await s.acquire(lease('L2'));
    expect(await s.local.inFlightTotal()).toBe(2);
    await back();
    expect(s.mode()).toBe('redis');
    expect(await sh.inner().replicaSpecs()).toEqual([{ url: U, backend: 'vllm', priority: 0 }]);
    expect(await sh.inner().inFlightTotal()).toBe(2);
    // Moved, not copied: the local store counts them no more.
    expect(await s.local.inFlightTotal()).toBe(0);
    // Each is released in the shared store, where it now counts.
    await s.release('L1', 5, 200);
    await s.release('L2', 5, 200);
    expect(await sh.inner().inFlightTotal()).toBe(0);
  });

  it('replays a release of a shared lease made while deciding alone', async () => {
    const { sh, s, cut, back } = await setup();
    expect(await s.acquire(lease('S1'))).toBe('loaded');
    await cut();
    expect(await s.release('S1', 3, 200)).toMatchObject({ id: 'S1', adapterIdle: true });
    expect(await sh.inner().inFlightTotal()).toBe(1);
    await back();
    expect(s.mode()).toBe('redis');
    expect(await sh.inner().inFlightTotal()).toBe(0);
    expect((await sharedInFlight(sh.inner()))!.inFlight).toBe(0);
  });

  it('sends again the end of a load lock begun there, and prunes with the leases it holds', async () => {
    const { sh, s, cut, back } = await setup();
    const fence = await s.beginLoad(U, 'b', 2, 4, 60_000);
    expect(fence).toBeGreaterThan(0);
    await s.acquire(lease('S1'));
    await cut();
    // Ended while the shared store is away: the shared lock stays until it is told.
    expect(await s.finishLoad(U, 'b', fence!, true, 3)).toBe(false);
    expect(await sh.inner().holds(U, 'b', fence!)).toBe(true);
    sh.prunes.length = 0;
    await back();
    expect(s.mode()).toBe('redis');
    expect(await sh.inner().holds(U, 'b', fence!)).toBe(false);
    expect(sh.prunes).toEqual([['S1']]);
  });

  it('stays deciding alone while the shared store refuses part of the hand-back, and tries again', async () => {
    const { sh, s, cut, back, clock } = await setup();
    await cut();
    await s.acquire(lease('L1'));
    // Answers the probe's ping, then fails the hand-back's first call.
    const upsert = sh.inner().upsertReplica.bind(sh.inner());
    let failures = 1;
    sh.inner().upsertReplica = async (spec) => {
      if (failures-- > 0) throw new Error('timeout');
      return upsert(spec);
    };
    await back();
    expect(s.mode()).toBe('local');
    expect(await sh.inner().inFlightTotal()).toBe(0);
    await clock.run(clock.now() + PROBE);
    expect(s.mode()).toBe('redis');
    expect(await sh.inner().inFlightTotal()).toBe(1);
  });

  it('admissions that outrun the walk keep it deciding alone until a probe finds none', async () => {
    const { sh, s, cut, back, clock } = await setup();
    await cut();
    await s.acquire(lease('L0'));
    // Every retake of a local lease admits another one locally (still deciding alone).
    let admitted = 0;
    let admit = true;
    const acquire = sh.inner().acquire.bind(sh.inner());
    sh.inner().acquire = async (l) => {
      if (admit) await s.acquire(lease(`N${++admitted}`));
      return acquire(l);
    };
    await back();
    expect(s.mode()).toBe('local');
    // Bounded: one pass before the loop and at most 100 in it.
    expect(admitted).toBe(101);
    admit = false;
    await clock.run(clock.now() + PROBE);
    expect(s.mode()).toBe('redis');
    expect(await sh.inner().inFlightTotal()).toBe(admitted + 1);
    expect(await s.local.inFlightTotal()).toBe(0);
  });
});

describe('FailoverFleetStore after an emptied state', () => {
  it('a decision that finds it emptied registers the replicas and re-takes the leases, once', async () => {
    const { sh, s } = await setup();
    await s.acquire(lease('S1'));
    sh.empty();
    sh.lost.value = true;
    sh.prunes.length = 0;
    const views = await s.views([U], { name: 'a' });
    expect(views.map((v) => v.url)).toEqual([U]);
    expect(await sh.inner().replicaSpecs()).toEqual([{ url: U, backend: 'vllm', priority: 0 }]);
    expect(await sh.inner().inFlightTotal()).toBe(1);
    expect(sh.prunes).toEqual([['S1']]);
    // Not lost again: nothing more is taken.
    await s.views([U], { name: 'a' });
    expect(sh.prunes).toHaveLength(1);
  });

  it('a decision that finds its replicas unknown there (not emptied) registers them and reads again', async () => {
    const { sh, s } = await setup();
    await s.acquire(lease('S1'));
    sh.empty(); // as a peer saw it: the epoch unchanged, the replicas gone
    expect((await s.views([U], { name: 'a' })).map((v) => v.url)).toEqual([U]);
    expect(await sh.inner().inFlightTotal()).toBe(1);
  });

  it('a store replaced on the same state prunes nothing: its successor prunes for both', async () => {
    const { sh, s, clock } = await setup();
    const next = new FailoverFleetStore(
      sh.store,
      silentLogger,
      { probeMs: PROBE, logEveryMs: 60_000 },
      clock,
    );
    await s.acquire(lease('S1'));
    await next.succeed(s);
    expect(sh.prunes.at(-1)).toEqual(['S1']);
    sh.prunes.length = 0;
    sh.empty();
    sh.lost.value = true;
    await s.views([U], { name: 'a' });
    expect(await sh.inner().inFlightTotal()).toBe(1);
    expect(sh.prunes).toEqual([]);
  });

  it('emptied a second time, it is taken again the second time too', async () => {
    const { sh, s } = await setup();
    await s.acquire(lease('S1'));
    for (let i = 0; i < 2; i++) {
      sh.empty();
      sh.lost.value = true;
      expect((await s.views([U], { name: 'a' })).map((v) => v.url)).toEqual([U]);
      expect(await sh.inner().inFlightTotal()).toBe(1);
    }
  });

  it('a heartbeat whose re-take fails leaves the node deciding alone', async () => {
    const { sh, s } = await setup();
    await s.acquire(lease('S1'));
    sh.down.value = true;
    sh.store.onStateLost!();
    await new Promise((r) => setImmediate(r));
    expect(s.mode()).toBe('local');
    await s.close();
  });

  it('a heartbeat that finds it emptied re-takes the leases too, unless deciding alone', async () => {
    const { sh, s, cut } = await setup();
    await s.acquire(lease('S1'));
    sh.empty();
    await s.upsertReplica({ url: U, backend: 'vllm', priority: 0 }); // another node registered it
    sh.store.onStateLost!();
    await new Promise((r) => setImmediate(r));
    expect(await sh.inner().inFlightTotal()).toBe(1);
    await cut();
    sh.empty();
    sh.down.value = false;
    sh.store.onStateLost!();
    await new Promise((r) => setImmediate(r));
    expect(await sh.inner().inFlightTotal()).toBe(0);
  });
});
