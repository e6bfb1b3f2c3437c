/**
 * Decisions during a recovery's last pass (src/fleet/redis/outage.ts `recovering`): they wait for
 * the recovery's end rather than decide alone, then go to the shared store if it ended well, and
 * decide alone if it failed or outlasted the wait. The shared side is the in-process store behind
 * a switch that fails every call, with a hook on `retake` (the last pass's call); the clock is
 * virtual, so a probe and a wait's bound run when the test says.
 */
import { VirtualClock } from '../../src/clock';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import type { SharedStore } from '../../src/fleet/redis/shared-store';
import type { Lease } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';
import { switchedShared } from '../helpers/switched-shared';
import { snapshotWithA } from './helpers';

const U = 'http://10.0.0.1:8000';
const PROBE = 1_000;
const WAIT = 200;
const lease = (id: string): Lease => ({ id, url: U, adapter: 'a', at: 2 });

/** The shared side: fails every call while `down`; `onRetake` runs before each retake is answered. */
function fakeShared() {
  const inner = new MemoryFleetStore();
  const sh = {
    inner,
    down: false,
    retakes: 0,
    /** Leases the shared store counts, by id. */
    open: new Set<string>(),
    /** Leases admitted in the shared store (not handed back), in order. */
    acquired: [] as string[],
    /** The lease whose acquire runs but whose reply is lost. */
    loseReply: '',
    onRetake: null as ((n: number) => Promise<void> | void) | null,
    store: null as unknown as SharedStore,
  };
  const extra: Record<string, unknown> = {
    ping: async () => 'PONG',
    prune: async () => 0,
    acquire: async (l: Lease) => {
      sh.acquired.push(l.id);
      const state = await inner.acquire(l);
      if (state !== undefined) sh.open.add(l.id);
      if (sh.loseReply === l.id) throw new Error('timed out'); // ran, its reply lost
      return state;
    },
    retake: async (leases: readonly Lease[]) => {
      await sh.onRetake?.(++sh.retakes);
      const refused = await inner.retake(leases);
      for (const l of leases) if (!refused.includes(l.id)) sh.open.add(l.id);
      return refused;
    },
    release: async (id: string, at: number, status?: number) => {
      sh.open.delete(id);
      return inner.release(id, at, status);
    },
  };
  sh.store = switchedShared(inner, extra, () => sh.down);
  return sh;
}

/** A node that took S1 in the shared store, then decided alone and took L1 locally. */
async function cutOff() {
  const clock = new VirtualClock();
  const sh = fakeShared();
  const s = new FailoverFleetStore(
    sh.store,
    silentLogger,
    { probeMs: PROBE, logEveryMs: 60_000, recoveryWaitMs: WAIT },
    clock,
  );
  await s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  await s.applySnapshot(U, snapshotWithA(1));
  expect(await s.acquire(lease('S1'))).toBe('loaded');
  sh.down = true;
  expect(await s.acquire(lease('L1'))).toBe('loaded');
  expect(s.mode()).toBe('local');
  sh.down = false;
  return { clock, sh, s };
}

/** Settles `p` into a box read later: whether it ended, and with what. */
function watch<T>(p: Promise<T>): { done: boolean; value?: T } {
  const box: { done: boolean; value?: T } = { done: false };
  void p.then((value) => Object.assign(box, { done: true, value }));
  return box;
}

const open = (sh: { open: Set<string> }) => [...sh.open].sort();

describe('decisions during a recovery', () => {
  it('an admission and a release during the last pass wait, then go to the shared store', async () => {
    const { clock, sh, s } = await cutOff();
    const during: { admit?: ReturnType<typeof watch>; release?: ReturnType<typeof watch> } = {};
    sh.onRetake = (n) => {
      // The first retake hands back every lease (the walk); L2, admitted meanwhile, is the last pass's.
      if (n === 1) void s.acquire(lease('L2'));
      if (n !== 2) return;
      during.admit = watch(s.acquire(lease('L3')));
      during.release = watch(s.release('S1', 3, 200));
    };
    await clock.run(clock.now() + PROBE);
    expect(s.mode()).toBe('redis');
    expect(during.admit?.done && during.release?.done).toBe(true);
    // L3 was admitted in the shared store, not locally and handed back by one more pass; S1 released there.
    expect(sh.acquired).toEqual(['S1', 'L3']);
    expect(sh.retakes).toBe(2);
    expect(open(sh)).toEqual(['L1', 'L2', 'L3']);
    expect(await s.local.inFlightTotal()).toBe(0);
    for (const id of ['L1', 'L2', 'L3']) await s.release(id, 4, 200);
    expect(open(sh)).toEqual([]);
  });

  it('a recovery that fails in its last pass lets the waiting admission decide alone, and the next one counts it', async () => {
    const { clock, sh, s } = await cutOff();
    let admit: ReturnType<typeof watch> | undefined;
    sh.onRetake = (n) => {
      if (n === 1) void s.acquire(lease('L2'));
      if (n !== 2) return;
      admit = watch(s.acquire(lease('L3')));
      throw new Error('connection lost');
    };
    await clock.run(clock.now() + PROBE); // the first probe's recovery, not the next
    expect(s.mode()).toBe('local');
    expect(admit?.done).toBe(true);
    expect(await s.local.inFlightTotal()).toBe(2); // L2 and L3: decided alone
    sh.onRetake = null;
    await clock.run(clock.now() + 2 * PROBE);
    expect(s.mode()).toBe('redis');
    expect(open(sh)).toEqual(['L1', 'L2', 'L3', 'S1']);
    expect(await s.local.inFlightTotal()).toBe(0);
  });

  it('an admission waits for a slow last pass at most recoveryWaitMs, then decides alone and is handed back', async () => {
    const { clock, sh, s } = await cutOff();
    let answer: (() => void) | null = null;
    let admit: ReturnType<typeof watch> | undefined;
    sh.onRetake = (n) => {
      if (n === 1) void s.acquire(lease('L2'));
      if (n !== 2) return;
      admit = watch(s.acquire(lease('L3')));
      return new Promise<void>((r) => (answer = r));
    };
    await clock.run(clock.now() + PROBE);
    expect(admit?.done).toBe(false);
    await clock.run(clock.now() + WAIT - 1);
    expect(admit?.done).toBe(false);
    await clock.run(clock.now() + 1);
    expect(admit?.done).toBe(true);
    expect(s.mode()).toBe('local');
    expect(await s.local.inFlightTotal()).toBe(2); // L3, and L2 whose retake is unanswered
    answer!();
    await clock.run(clock.now());
    // The pass after took L3 too.
    expect(s.mode()).toBe('redis');
    expect(open(sh)).toEqual(['L1', 'L2', 'L3', 'S1']);
    expect(await s.local.inFlightTotal()).toBe(0);
  });

  it('an admission that waited, then timed out in the shared store, is released there too', async () => {
    const { clock, sh, s } = await cutOff();
    let admit: Promise<unknown> | undefined;
    sh.onRetake = (n) => {
      if (n === 1) void s.acquire(lease('L2'));
      if (n !== 2) return;
      sh.loseReply = 'L3';
      admit = s.acquire(lease('L3'));
    };
    await clock.run(clock.now() + PROBE);
    await admit;
    // Decided alone after its shared call failed: that call ran, so L3's release is owed there.
    expect(s.mode()).toBe('local');
    expect(open(sh)).toContain('L3');
    await s.release('L3', 4, 200);
    sh.onRetake = null;
    await clock.run(clock.now() + PROBE);
    expect(s.mode()).toBe('redis');
    expect(open(sh)).toEqual(['L1', 'L2', 'S1']);
  });

  it('an unload that waited for the recovery is refused: the hold-off after it began', async () => {
    const { clock, sh, s } = await cutOff();
    let unload: ReturnType<typeof watch> | undefined;
    sh.onRetake = (n) => {
      if (n === 1) void s.acquire(lease('L2'));
      if (n === 2) unload = watch(s.beginUnload(U, 'b', clock.now(), 60_000));
    };
    await sh.inner.applySnapshot(U, {
      ...snapshotWithA(1),
      load: { running: 0, waiting: 0, kvUsage: 0.1, activeAdapters: ['b'], malformedLines: 0 },
      registry: [
        { name: 'a', path: '/adapters/a' },
        { name: 'b', path: '/adapters/b' },
      ],
    });
    await clock.run(clock.now() + PROBE);
    expect(s.mode()).toBe('redis');
    expect(unload).toEqual({ done: true, value: null });
    expect((await sh.inner.views([U], { name: 'b' }))[0]!.adapter?.state).toBe('loaded');
  });
});
