/**
 * Which adapters a poll's reading holds from unloads (src/adapters/unseen-busy.ts): those the
 * replica reports running or waiting that no lease here held when the poll began, nor another
 * runtime's store counts, unless a request of this node routed there, open when the poll began,
 * ended since (its own word: ReplicaWord `servedEndedSince`, on the monotonic time line). Unit test
 * of the one module: the in-process store, a ReplicaWord that records the holds it is asked to
 * start, and a real one's `servedEnds`.
 */
import type { ReplicaApi } from '../../src/backends/replica-api';
import { ReplicaWord } from '../../src/adapters/replica-word';
import { holdUnseenBusy } from '../../src/adapters/unseen-busy';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import type { ReplicaLoad } from '../../src/metrics/replica-load';
import { silentLogger } from '../../src/log';
import { SteppedClock } from './helpers';

const U = 'http://10.0.0.1:8000';
const POLL_STARTED = 1000;
/** The judge's clock, 10 ms into the poll (`now` and `monotonic` alike). */
const JUDGED = {
  now: () => POLL_STARTED + 10,
  monotonic: () => POLL_STARTED + 10,
  after: () => () => undefined,
};

const reading = (active: string[], reportsActivity = true): ReplicaLoad => ({
  running: active.length,
  waiting: 0,
  activeAdapters: active,
  malformedLines: 0,
  ...(reportsActivity ? { reportsActivity } : {}),
});

/** `a`, `b`, `c` loaded on U before the poll began; `b` under a lease of this node. */
async function fleet(): Promise<MemoryFleetStore> {
  const store = new MemoryFleetStore();
  await store.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  for (const name of ['a', 'b', 'c']) {
    const f = await store.beginLoad(U, name, 10, 10);
    expect(await store.finishLoad(U, name, f!, true, 11)).toBe(true);
  }
  await store.acquire({ id: 'mine', url: U, adapter: 'b', at: 500 });
  return store;
}

async function heldBy(
  store: MemoryFleetStore,
  load: ReplicaLoad,
  leasedElsewhere: ((url: string, adapter: string) => boolean) | null = null,
  endedHere: ((url: string, adapter: string) => boolean) | null = null,
): Promise<string[]> {
  const held: string[] = [];
  const word = { holdUnseen: (url: string, name: string) => held.push(`${url} ${name}`) };
  await holdUnseenBusy(store, word as unknown as ReplicaWord, leasedElsewhere, U, load, endedHere, {
    clock: JUDGED,
    mono: POLL_STARTED,
  });
  return held;
}

/** A real ReplicaWord on a clock set by hand (its monotonic time line: `now`). */
function wordAt(): { word: ReplicaWord; set: (t: number) => void } {
  let t = 0;
  const clock = { now: () => t, after: () => () => undefined };
  const api = {} as unknown as ReplicaApi;
  return { word: new ReplicaWord(api, clock, silentLogger), set: (v) => (t = v) };
}

describe('a poll’s reading and the unseen hold', () => {
  it('holds what runs with no lease here, resident or not, never what a lease here holds', async () => {
    const store = await fleet();
    expect(await heldBy(store, reading(['a', 'b', 'x']))).toEqual([`${U} a`, `${U} x`]);
  });

  it('holds what a lease taken after the poll began would explain: the replica may have read before it', async () => {
    const store = await fleet();
    await store.acquire({ id: 'late', url: U, adapter: 'c', at: POLL_STARTED + 1 });
    await store.acquire({ id: 'then', url: U, adapter: 'a', at: POLL_STARTED });
    expect(await heldBy(store, reading(['a', 'b', 'c']))).toEqual([`${U} c`]);
  });

  it('holds nothing a request of this node that ended since the poll began may explain', async () => {
    const store = await fleet();
    expect(await heldBy(store, reading(['a', 'c']), null, (_u, name) => name === 'c')).toEqual([`${U} a`]);
  });

  it('holds what a lease released within the poll leaves unexplained: no request of this node ended', async () => {
    // Another node's release (its clock's time), a guessed lease given back unused: review 64.
    const store = await fleet();
    await store.acquire({ id: 'short', url: U, adapter: 'c', at: 900 });
    await store.release('short', POLL_STARTED + 5, 200);
    expect(await heldBy(store, reading(['c']))).toEqual([`${U} c`]);
  });

  it('reads a request of this node ended the moment the poll began as since it, one ended before as not', () => {
    const { word, set } = wordAt();
    set(POLL_STARTED);
    word.servedEnded(U, 'c');
    set(POLL_STARTED - 1);
    word.servedEnded(U, 'a');
    expect(word.servedEndedSince(U, 'c', POLL_STARTED)).toBe(true);
    expect(word.servedEndedSince(U, 'a', POLL_STARTED)).toBe(false);
    expect(word.servedEndedSince(U, 'b', POLL_STARTED)).toBe(false);
    expect(word.servedEndedSince('http://10.0.0.2:8000', 'c', POLL_STARTED)).toBe(false);
  });

  // DST seed 1965638: after an emptied state, the poll's own registry read adopts what the replica
  // runs, its lastUsed the snapshot's time; that is no lease, and it ran with none here.
  it('holds what runs that the poll’s own registry read adopted, the state not knowing it before', async () => {
    const store = await fleet();
    await store.applySnapshot(U, {
      at: POLL_STARTED + 5,
      startedAt: POLL_STARTED,
      ok: true,
      load: reading(['x']),
      registry: ['a', 'b', 'c', 'x'].map((name) => ({ name, path: `/adapters/${name}` })),
      managed: () => true,
    });
    expect((await store.residents(U)).find((r) => r.name === 'x')?.state).toBe('loaded');
    expect(await heldBy(store, reading(['x']))).toEqual([`${U} x`]);
  });

  it('holds nothing another runtime’s store counts', async () => {
    const store = await fleet();
    expect(await heldBy(store, reading(['a', 'c']), (_u, name) => name === 'a')).toEqual([`${U} c`]);
  });

  it('holds nothing from a replica that cannot say what runs', async () => {
    const store = await fleet();
    expect(await heldBy(store, reading(['a'], false))).toEqual([]);
  });
});

describe('a poll’s reading and the unseen hold, the wall clock stepped (a node’s own store)', () => {
  const clock = new SteppedClock(POLL_STARTED);
  let store: MemoryFleetStore;
  const heldNow = async (load: ReplicaLoad) => {
    const held: string[] = [];
    const word = { holdUnseen: (url: string, name: string) => held.push(`${url} ${name}`) };
    await holdUnseenBusy(store, word as unknown as ReplicaWord, null, U, load, null, {
      clock,
      mono: POLL_STARTED,
    });
    return held;
  };

  beforeEach(async () => {
    clock.t = 10;
    clock.skew = 0;
    store = new MemoryFleetStore(clock);
    await store.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    const f = await store.beginLoad(U, 'c', clock.now(), 10);
    expect(await store.finishLoad(U, 'c', f!, true, clock.now())).toBe(true);
  });

  it('holds what a lease taken after the poll began would explain, the clock stepped ahead since', async () => {
    clock.t = POLL_STARTED + 5;
    await store.acquire({ id: 'late', url: U, adapter: 'c', at: clock.now() });
    clock.skew = 300;
    clock.t = POLL_STARTED + 10;
    expect(await heldNow(reading(['c']))).toEqual([`${U} c`]);
  });

  it('holds nothing a lease taken before the poll began explains, the clock stepped back since', async () => {
    clock.t = POLL_STARTED - 5;
    await store.acquire({ id: 'then', url: U, adapter: 'c', at: clock.now() });
    clock.skew = -300;
    clock.t = POLL_STARTED + 10;
    expect(await heldNow(reading(['c']))).toEqual([]);
  });
});
