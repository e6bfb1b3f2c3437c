/**
 * Unit test of DegradableFleetStore (src/fleet/redis/degradable-store.ts, one module), written
 * against its mutation run (docs/reliability/mutation-testing.md): which store decides each
 * operation (the shared one while it answers, the local one once a call failed), that
 * observations reach both but never a shared store known to be down, that local fences are
 * negative and end in the local store, and the unload and undo hold-offs. The shared side is an
 * in-process store that fails every call while `down` and records the calls it is sent; the
 * subclass's hand-back answers as the test says; the clock is virtual.
 */
import { VirtualClock } from '../../src/clock';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { DegradableFleetStore } from '../../src/fleet/redis/degradable-store';
import { UNLOAD_HOLD_OFF_PROBES } from '../../src/fleet/redis/outage';
import type { SharedStore } from '../../src/fleet/redis/shared-store';
import type { FleetEvent } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';
import { snapshotWithA } from './helpers';

const U = 'http://10.0.0.1:8000';
const V = 'http://10.0.0.2:8000';
const PROBE = 1_000;
const TTL = 60_000;
const spec = (url: string) => ({ url, backend: 'vllm' as const, priority: 0 });
const event = (adapter: string): FleetEvent => ({ at: 1, url: U, adapter, op: 'load', result: 'ok' });

/** The subclass: recovery is the failover store's; here it answers `handBack`. */
class Store extends DegradableFleetStore {
  handBack = true;
  protected async recover(): Promise<boolean> {
    return this.handBack;
  }
  /** A record change into this store whose old runtime decides until `decided`. */
  receiving(decided: Promise<void>): Promise<void> {
    return this.outage.receiving(decided);
  }
}

/** The shared side: an in-process store failing every call while `down`; `calls` names each call sent. */
function fakeShared(withTime = true) {
  const down = { value: false };
  const calls: string[] = [];
  const inner = new MemoryFleetStore();
  const extra: Record<string, unknown> = { ping: async () => 'PONG', onRemoteChange: undefined };
  if (withTime) extra.sharedTime = async () => 12_345;
  const store = new Proxy(extra, {
    get(target, key) {
      if (key === 'onRemoteChange') return target.onRemoteChange;
      const own = key in target ? target[key as string] : undefined;
      const v = own ?? (Reflect.get(inner, key, inner) as unknown);
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        calls.push(String(key));
        if (down.value) return Promise.reject(new Error('shared store down'));
        return (v as (...a: unknown[]) => unknown).apply(own ? target : inner, args);
      };
    },
    set(target, key, value) {
      target[key as string] = value;
      return true;
    },
  }) as unknown as SharedStore;
  return { store, down, calls, inner, extra };
}

/** Virtual time; `now` off it by `skew` (a skew correction stepping the wall clock), `monotonic` never. */
class SkewedClock extends VirtualClock {
  skew = 0;
  override now(): number {
    return super.now() + this.skew;
  }
  monotonic(): number {
    return super.now();
  }
}

async function setup(withTime = true, clock: VirtualClock = new VirtualClock()) {
  const sh = fakeShared(withTime);
  const s = new Store(sh.store, silentLogger, { probeMs: PROBE, logEveryMs: 60_000 }, clock);
  await s.upsertReplica(spec(U));
  await s.applySnapshot(U, snapshotWithA(1));
  /** Cuts the shared store off and makes a decision notice it. */
  const cut = async () => {
    sh.down.value = true;
    await s.replicaSpecs();
    expect(s.mode()).toBe('local');
    sh.calls.length = 0;
  };
  /** Brings it back and lets the next probe hand back. */
  const back = async () => {
    sh.down.value = false;
    await clock.run(clock.now() + PROBE);
    expect(s.mode()).toBe('redis');
  };
  return { clock, sh, s, cut, back };
}

describe('DegradableFleetStore: which store decides', () => {
  it('asks the shared store while it answers, the local one once a call failed', async () => {
    const { sh, s, cut } = await setup();
    // What only the shared store knows: a second replica, a loaded adapter, a lease, an event, a placement.
    await sh.inner.upsertReplica(spec(V));
    const f = await sh.inner.beginLoad(U, 'b', 2, 4);
    await sh.inner.finishLoad(U, 'b', f!, true, 2);
    await sh.inner.acquire({ id: 'L', url: U, adapter: 'b', at: 3 });
    await sh.inner.pushEvent(event('only-shared'));
    await sh.inner.claimPlacement('p', V, undefined, 3, TTL);

    expect(s.mode()).toBe('redis');
    expect((await s.replicaSpecs()).map((r) => r.url)).toEqual([U, V]);
    expect((await s.residents(U)).map((r) => r.name)).toContain('b');
    expect(await s.inFlightTotal()).toBe(1);
    expect((await s.events(10)).map((e) => e.adapter)).toEqual(['only-shared']);
    expect((await s.dump()).replicas).toHaveLength(2);
    expect(await s.claimPlacement('p', U, undefined, 4, TTL)).toBe(V);
    expect(await s.sharedTime()).toBe(12_345);
    await s.touch(U, 'b', 5);
    expect(sh.calls).toContain('touch');

    await cut();
    expect((await s.replicaSpecs()).map((r) => r.url)).toEqual([U]);
    expect((await s.residents(U)).map((r) => r.name)).not.toContain('b');
    expect(await s.inFlightTotal()).toBe(0);
    expect(await s.events(10)).toEqual([]);
    expect((await s.dump()).replicas).toHaveLength(1);
    expect(await s.claimPlacement('p', U, undefined, 4, TTL)).toBe(U);
    expect(await s.sharedTime()).toBeUndefined();
    await s.touch(U, 'a', 7);
    // The local store decides now: its LRU order must follow the requests made meanwhile.
    expect((await s.local.residents(U)).find((r) => r.name === 'a')?.lastUsed).toBe(7);
    // Deciding alone never asks the shared store (a request would wait its timeout each time).
    expect(sh.calls).toEqual([]);
  });

  it('a shared store without a clock answers no time and stays shared', async () => {
    const { s } = await setup(false);
    expect(await s.sharedTime()).toBeUndefined();
    expect(s.mode()).toBe('redis');
  });

  it('a decision that fails degrades and answers from the local store', async () => {
    const { sh, s } = await setup();
    await sh.inner.upsertReplica(spec(V));
    sh.down.value = true;
    expect((await s.replicaSpecs()).map((r) => r.url)).toEqual([U]);
    expect(s.mode()).toBe('local');
  });

  it('passes the remote-change hook through to the shared store', async () => {
    const { sh, s } = await setup();
    expect(s.onRemoteChange).toBeNull();
    const fn = () => undefined;
    s.onRemoteChange = fn;
    expect(sh.extra.onRemoteChange).toBe(fn);
    expect(s.onRemoteChange).toBe(fn);
  });
});

describe('DegradableFleetStore: observations', () => {
  it('reach both stores while shared, only the local one while deciding alone', async () => {
    const { sh, s, cut } = await setup();
    const observeAll = async (name: string) => {
      await s.upsertReplica(spec(V));
      await s.reportOutcome(U, false, 3);
      await s.applySnapshot(U, snapshotWithA(4));
      await s.forget(U, 'a', 5);
      await s.releasePlacement('p', U);
      await s.pushEvent(event(name));
    };
    sh.calls.length = 0;
    await observeAll('shared');
    expect(sh.calls).toEqual([
      'upsertReplica',
      'reportOutcome',
      'applySnapshot',
      'forget',
      'releasePlacement',
      'pushEvent',
    ]);
    expect((await sh.inner.events(10)).map((e) => e.adapter)).toEqual(['shared']);
    expect((await s.local.events(10)).map((e) => e.adapter)).toEqual(['shared']);
    await cut();
    await observeAll('alone');
    expect(sh.calls).toEqual([]);
    expect((await s.local.events(10)).map((e) => e.adapter)).toContain('alone');
  });

  it('an observation the shared store fails degrades, the local store keeps it', async () => {
    const { sh, s } = await setup();
    sh.down.value = true;
    await s.upsertReplica(spec(V));
    expect(s.mode()).toBe('local');
    expect((await s.local.replicaSpecs()).map((r) => r.url)).toEqual([U, V]);
  });
});

describe('DegradableFleetStore: locks and fences', () => {
  it('a load begun shared ends shared; one begun alone has a negative fence and ends locally', async () => {
    const { sh, s, cut, back } = await setup();
    const shared = await s.beginLoad(U, 'b', 2, 4, TTL);
    expect(shared).toBeGreaterThan(0);
    expect(await sh.inner.holds(U, 'b', shared!)).toBe(true);
    expect(await s.local.holds(U, 'b', shared!)).toBe(false);
    expect(await s.holds(U, 'b', shared!)).toBe(true);

    await cut();
    // The shared lock's end is lost while alone: false, and the lock stays there until its TTL.
    expect(await s.holds(U, 'b', shared!)).toBe(false);
    expect(await s.finishLoad(U, 'b', shared!, true, 3)).toBe(false);
    expect(await sh.inner.holds(U, 'b', shared!)).toBe(true);

    const alone = await s.beginLoad(U, 'c', 3, 4, TTL);
    expect(alone).toBeLessThan(0);
    expect(await s.local.holds(U, 'c', -alone!)).toBe(true);
    expect(await s.holds(U, 'c', alone!)).toBe(true);
    // The local store is full for a limit of 1 (a is resident): refused, null, not a fence.
    expect(await s.beginLoad(U, 'd', 3, 1, TTL)).toBeNull();

    await back();
    sh.calls.length = 0;
    // Back shared: the lock begun alone still ends in the local store, and the shared store is not asked.
    expect(await s.holds(U, 'c', alone!)).toBe(true);
    expect(await s.finishLoad(U, 'c', alone!, true, 4)).toBe(true);
    expect((await s.local.residents(U)).find((r) => r.name === 'c')?.state).toBe('loaded');
    expect(sh.calls).toEqual([]);
    // And the shared one ends in the shared store.
    expect(await s.finishLoad(U, 'b', shared!, true, 5)).toBe(true);
    expect((await sh.inner.residents(U)).find((r) => r.name === 'b')?.state).toBe('loaded');
  });

  it('unloads are granted by the shared store only, never alone, never while held off', async () => {
    const { clock, sh, s, cut, back } = await setup();
    const f = await s.beginUnload(U, 'a', 2, TTL);
    expect(f).toBeGreaterThan(0);
    expect(await s.finishUnload(U, 'a', f!, false, 3)).toBe(true);

    await cut();
    // The local store would grant it (a is loaded, idle there): alone, nothing is unloaded.
    const probe = await s.local.beginUnload(U, 'a', 4, TTL);
    expect(probe).not.toBeNull();
    expect(await s.local.finishUnload(U, 'a', probe!, false, 4)).toBe(true);
    expect(await s.beginUnload(U, 'a', 4, TTL)).toBeNull();
    expect(await s.finishUnload(U, 'a', f!, true, 4)).toBe(false);

    await back();
    sh.calls.length = 0;
    // Just back: peers may still decide alone; the shared store is not even asked.
    expect(s.unloadsHeldOff()).toBe(true);
    expect(await s.beginUnload(U, 'a', 5, TTL)).toBeNull();
    expect(sh.calls).toEqual([]);
    await clock.run(clock.now() + UNLOAD_HOLD_OFF_PROBES * PROBE);
    expect(await s.beginUnload(U, 'a', 6, TTL)).toBeGreaterThan(0);
  });
});

describe('DegradableFleetStore: hold-offs', () => {
  it('holds unloads off for two probe intervals after the shared store is back', async () => {
    const { clock, s, cut, back } = await setup();
    expect(s.unloadsHeldOff()).toBe(false);
    await cut();
    expect(s.unloadsHeldOff()).toBe(false);
    await back();
    const at = clock.now();
    expect(s.unloadsHeldOff()).toBe(true);
    await clock.run(at + UNLOAD_HOLD_OFF_PROBES * PROBE - 1);
    expect(s.unloadsHeldOff()).toBe(true);
    await clock.run(at + UNLOAD_HOLD_OFF_PROBES * PROBE);
    expect(s.unloadsHeldOff()).toBe(false);
  });

  it('holds unloads off for two probe intervals of true time, the wall clock stepped ahead since it was back', async () => {
    const skewed = new SkewedClock();
    const { clock, s, cut, back } = await setup(true, skewed);
    await cut();
    await back();
    const at = skewed.monotonic();
    skewed.skew = 600;
    await clock.run(at + UNLOAD_HOLD_OFF_PROBES * PROBE - 1);
    expect(s.unloadsHeldOff()).toBe(true);
    await clock.run(at + UNLOAD_HOLD_OFF_PROBES * PROBE);
    expect(s.unloadsHeldOff()).toBe(false);
  });

  it('holds unloads off while a record change is received', async () => {
    const { clock, s } = await setup();
    let decided!: () => void;
    const receiving = s.receiving(new Promise<void>((r) => (decided = r)));
    expect(s.unloadsHeldOff()).toBe(true);
    expect(s.undoHeldOff(5)).toBe(true);
    decided();
    await receiving;
    await clock.run(clock.now() + UNLOAD_HOLD_OFF_PROBES * PROBE);
    expect(s.unloadsHeldOff()).toBe(false);
  });

  it('holds off the undo of a load decided alone once shared again, and any undo during the hold-off', async () => {
    const { clock, s, cut, back } = await setup();
    // Shared, no hold-off: a shared load's undo goes ahead; one decided alone is held off
    // (other nodes, not seeing it, may have loaded and leased the same adapter).
    expect(s.undoHeldOff(5)).toBe(false);
    expect(s.undoHeldOff(-5)).toBe(true);
    await cut();
    // Alone: this node's own load, which no one else can have leased through this store.
    expect(s.undoHeldOff(-5)).toBe(false);
    expect(s.undoHeldOff(5)).toBe(false);
    await back();
    expect(s.undoHeldOff(5)).toBe(true);
    expect(s.undoHeldOff(-5)).toBe(true);
    await clock.run(clock.now() + UNLOAD_HOLD_OFF_PROBES * PROBE);
    expect(s.undoHeldOff(5)).toBe(false);
    expect(s.undoHeldOff(-5)).toBe(true);
  });

  it('stays alone while the hand-back is refused, and holds nothing off meanwhile', async () => {
    const { clock, sh, s, cut } = await setup();
    await cut();
    s.handBack = false;
    sh.down.value = false;
    await clock.run(clock.now() + 3 * PROBE);
    expect(s.mode()).toBe('local');
    expect(s.unloadsHeldOff()).toBe(false);
    s.handBack = true;
    await clock.run(clock.now() + PROBE);
    expect(s.mode()).toBe('redis');
    expect(s.unloadsHeldOff()).toBe(true);
  });
});
