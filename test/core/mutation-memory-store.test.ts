/**
 * Unit test of the in-process store (src/fleet/memory-store.ts, one module), written against the
 * survivors of its mutation run (docs/reliability.md#mutation-testing): the boundaries of every
 * window it keeps (a placement's TTL, the room an unload made, a budget's window, a stale poll,
 * a registry read older than a change), what a node that decided alone owes the shared store
 * (`seenDown`), the load and unload locks' conditions and fences, and the release's answer.
 * Virtual times only: every `at` is the test's.
 */
import { MemoryFleetStore, PASSIVE_FAILURE_LIMIT } from '../../src/fleet/memory-store';
import type { FleetStore } from '../../src/fleet/store';
import type { ReplicaSnapshot } from '../../src/fleet/types';

const U = 'http://10.0.0.1:8000';
const V = 'http://10.0.0.2:8000';
const L = 'http://10.0.0.3:8080';
const TTL = 100;
const LIMIT = 10;
const load = { running: 1, waiting: 2, kvUsage: 0.3, activeAdapters: [], malformedLines: 0 };

async function store(...urls: string[]): Promise<MemoryFleetStore> {
  const s = new MemoryFleetStore();
  for (const url of urls.length ? urls : [U]) await s.upsertReplica({ url, backend: 'vllm', priority: 0 });
  return s;
}

async function loaded(s: FleetStore, name: string, at: number, url = U): Promise<void> {
  const f = await s.beginLoad(url, name, at, LIMIT, TTL);
  expect(f).not.toBeNull();
  expect(await s.finishLoad(url, name, f!, true, at)).toBe(true);
}

const states = async (s: FleetStore, url = U) =>
  Object.fromEntries((await s.residents(url)).map((r) => [r.name, r.state]));

const poll = (at: number, extra: Partial<ReplicaSnapshot> = {}): ReplicaSnapshot => ({
  at,
  ok: true,
  load,
  ...extra,
});

describe('MemoryFleetStore: load and unload locks', () => {
  it('hands out growing fences, even two at one time, and holds only the current one', async () => {
    const s = await store();
    const a = (await s.beginLoad(U, 'a', 5, LIMIT))!;
    const b = (await s.beginLoad(U, 'b', 5, LIMIT))!;
    expect(b).toBeGreaterThan(a);
    expect(await s.holds(U, 'a', a)).toBe(true);
    expect(await s.holds(U, 'a', b)).toBe(false);
    expect(await s.holds(V, 'a', a)).toBe(false);
    expect(await s.finishLoad(U, 'a', b, true, 6)).toBe(false); // another lock's fence
    expect(await s.finishLoad(V, 'a', a, true, 6)).toBe(false); // no such replica
    expect(await s.finishLoad(U, 'a', a, true, 6)).toBe(true);
    expect(await s.finishLoad(U, 'a', a, true, 7)).toBe(false); // ended already: not loading
    expect(await s.holds(U, 'a', a)).toBe(false); // a loaded entry has no fence
    const u = (await s.beginUnload(U, 'a', 8, TTL))!;
    expect(u).toBeGreaterThan(b);
    expect(await s.finishUnload(U, 'a', u + 1, true, 9)).toBe(false);
    expect(await s.finishUnload(V, 'a', u, true, 9)).toBe(false);
    expect(await s.finishUnload(U, 'a', u, true, 9)).toBe(true);
    expect(await s.finishUnload(U, 'a', u, true, 9)).toBe(false);
    expect(await states(s)).toEqual({ b: 'loading' });
  });

  it('begins a load only on a known replica, below the limit, for an adapter not there in any state', async () => {
    const s = await store();
    expect(await s.beginLoad(V, 'a', 1, LIMIT)).toBeNull();
    await s.applySnapshot(U, poll(1, { registry: [{ name: 'boot', path: '' }] }));
    expect(await s.beginLoad(U, 'boot', 2, LIMIT)).toBeNull(); // static
    await loaded(s, 'a', 3);
    expect(await s.beginLoad(U, 'a', 4, LIMIT)).toBeNull(); // loaded
    expect(await s.beginLoad(U, 'b', 4, 1)).toBeNull(); // one slot, taken by a
    expect(await s.beginLoad(U, 'b', 4, 2)).not.toBeNull();
    expect((await s.views([U]))[0]!.residentCount).toBe(2);
  });

  it('a failed load is forgotten and marked gone: a registry read before its end does not bring it back', async () => {
    const s = await store();
    await s.applySnapshot(U, poll(1, { registry: [] }));
    const f = (await s.beginLoad(U, 'a', 10, LIMIT))!;
    expect(await s.finishLoad(U, 'a', f, false, 20)).toBe(true);
    expect(await states(s)).toEqual({});
    expect((await s.views([U]))[0]!.residentCount).toBe(0);
    await s.applySnapshot(U, poll(21, { startedAt: 20, registry: [{ name: 'a', path: '' }] }));
    expect(await states(s)).toEqual({}); // read as it ended: still gone
    await s.applySnapshot(U, poll(22, { startedAt: 21, registry: [{ name: 'a', path: '' }] }));
    expect(await states(s)).toEqual({ a: 'loaded' }); // read after: there (a router loaded here)
  });

  it('unloads only a loaded adapter no lease holds; a failed unload leaves it loaded with its recency', async () => {
    const s = await store();
    await s.applySnapshot(U, poll(1, { registry: [{ name: 'boot', path: '' }] }));
    expect(await s.beginUnload(U, 'boot', 2, TTL)).toBeNull();
    expect(await s.beginUnload(V, 'a', 2, TTL)).toBeNull();
    const f = (await s.beginLoad(U, 'a', 3, LIMIT))!;
    expect(await s.beginUnload(U, 'a', 4, TTL)).toBeNull(); // loading
    await s.finishLoad(U, 'a', f, true, 5);
    await s.touch(U, 'a', 7);
    await s.acquire({ id: 'r', url: U, adapter: 'a', at: 8 });
    expect(await s.beginUnload(U, 'a', 9, TTL)).toBeNull(); // held
    await s.release('r', 10);
    const u = (await s.beginUnload(U, 'a', 11, TTL))!;
    expect(await s.beginUnload(U, 'a', 11, TTL)).toBeNull(); // unloading already
    expect(await s.holds(U, 'a', u)).toBe(true);
    expect(await s.finishUnload(U, 'a', u, false, 12)).toBe(true);
    expect((await s.residents(U)).find((r) => r.name === 'a')).toMatchObject({
      state: 'loaded',
      since: 12,
      lastUsed: 10,
    });
    expect((await s.views([U]))[0]!.residentCount).toBe(1);
  });

  it('a finished unload is gone: a registry read begun before it does not revive it, one after does', async () => {
    const s = await store();
    await s.applySnapshot(U, poll(1, { registry: [] }));
    await loaded(s, 'a', 2);
    const u = (await s.beginUnload(U, 'a', 3, TTL))!;
    await s.finishUnload(U, 'a', u, true, 10);
    expect((await s.views([U]))[0]!.residentCount).toBe(0);
    await s.applySnapshot(U, poll(11, { startedAt: 9, registry: [{ name: 'a', path: '' }] }));
    expect(await states(s)).toEqual({});
    await s.applySnapshot(U, poll(12, { startedAt: 11, registry: [{ name: 'a', path: '' }] }));
    expect(await states(s)).toEqual({ a: 'loaded' });
  });

  it('forgets a loaded adapter (marked gone), never a static, loading or unloading one', async () => {
    const s = await store();
    await s.applySnapshot(U, poll(1, { registry: [{ name: 'boot', path: '' }] }));
    await loaded(s, 'a', 2);
    await loaded(s, 'c', 2);
    await s.beginLoad(U, 'b', 3, LIMIT);
    await s.beginUnload(U, 'c', 3, TTL);
    for (const name of ['boot', 'b', 'c', 'none']) await s.forget(U, name, 4);
    await s.forget(V, 'a', 4);
    expect(await states(s)).toEqual({ boot: 'static', a: 'loaded', b: 'loading', c: 'unloading' });
    await s.forget(U, 'a', 5);
    expect(await states(s)).toEqual({ boot: 'static', b: 'loading', c: 'unloading' });
    await s.applySnapshot(
      U,
      poll(6, {
        startedAt: 5,
        registry: [
          { name: 'boot', path: '' },
          { name: 'a', path: '' },
        ],
      }),
    );
    expect((await states(s)).a).toBeUndefined();
  });
});

describe('MemoryFleetStore: room made for one adapter', () => {
  async function full() {
    const s = await store();
    await loaded(s, 'a', 1);
    await loaded(s, 'b', 2);
    return s;
  }

  it('keeps the room an unload made for x until the unload lock TTL ends, to the ms', async () => {
    const s = await full();
    const u = (await s.beginUnload(U, 'a', 5, TTL, 'x'))!;
    expect(await s.finishUnload(U, 'a', u, true, 10)).toBe(true);
    expect(await s.beginUnload(U, 'b', 10 + TTL - 1, TTL, 'x')).toBeNull();
    expect(await s.beginUnload(U, 'b', 10 + TTL, TTL, 'x')).not.toBeNull();
  });

  it('makes no room on a failed unload, nor on one begun without a TTL', async () => {
    const s = await full();
    const u = (await s.beginUnload(U, 'a', 5, TTL, 'x'))!;
    await s.finishUnload(U, 'a', u, false, 6);
    const w = (await s.beginUnload(U, 'a', 7, undefined, 'x'))!;
    expect(w).not.toBeNull();
    await s.finishUnload(U, 'a', w, true, 8);
    expect(await s.beginUnload(U, 'b', 9, TTL, 'x')).not.toBeNull();
  });

  it('forgets a TTL once its unload ended: a later unload without one makes no room', async () => {
    const s = await full();
    const u = (await s.beginUnload(U, 'a', 5, TTL, 'x'))!;
    await s.finishUnload(U, 'a', u, false, 6); // the TTL ends with it
    const w = (await s.beginUnload(U, 'a', 7, undefined, 'x'))!;
    await s.finishUnload(U, 'a', w, true, 8);
    expect(await s.beginUnload(U, 'b', 9, TTL, 'x')).not.toBeNull();
  });

  it('refuses an unload for x while x is resident here or another unload for x is under way', async () => {
    const s = await full();
    await loaded(s, 'c', 3);
    const u = (await s.beginUnload(U, 'a', 5, TTL, 'x'))!;
    expect(u).not.toBeNull();
    expect(await s.beginUnload(U, 'b', 6, TTL, 'x')).toBeNull();
    expect(await s.beginUnload(U, 'b', 6, TTL, 'y')).not.toBeNull(); // for another adapter
    expect(await s.beginUnload(U, 'c', 6, TTL, 'a')).toBeNull(); // `a` is resident (unloading)
  });

  it("an empty `for` makes room for no one and is refused by no one's room", async () => {
    const s = await full();
    const u = (await s.beginUnload(U, 'a', 5, TTL, ''))!;
    expect(await s.finishUnload(U, 'a', u, true, 6)).toBe(true);
    expect(await s.beginUnload(U, 'b', 7, TTL, '')).not.toBeNull();
  });

  it('another replica keeps its own room', async () => {
    const s = await store(U, V);
    await loaded(s, 'a', 1);
    await loaded(s, 'b', 1, V);
    const u = (await s.beginUnload(U, 'a', 5, TTL, 'x'))!;
    await s.finishUnload(U, 'a', u, true, 6);
    expect(await s.beginUnload(V, 'b', 7, TTL, 'x')).not.toBeNull();
  });

  it('a load of x refused keeps its room, judged by the caller’s limit; one begun takes it', async () => {
    const s = await full();
    const u = (await s.beginUnload(U, 'a', 5, TTL, 'x'))!;
    await s.finishUnload(U, 'a', u, true, 6);
    expect(await s.beginLoad(U, 'x', 7, 1)).toBeNull(); // refused: the limit
    expect(await s.beginUnload(U, 'b', 8, TTL, 'x', 2)).toBeNull(); // 1 of 2: the room is free
    expect(await s.beginUnload(U, 'b', 8, TTL, 'x', 1)).not.toBeNull(); // 1 of 1: taken
    const t = await store();
    await loaded(t, 'a', 1);
    const v = (await t.beginUnload(U, 'a', 5, TTL, 'x'))!;
    await t.finishUnload(U, 'a', v, true, 6);
    await loaded(t, 'b', 7);
    const x = (await t.beginLoad(U, 'x', 8, 3))!; // begun: its room is gone
    expect(await t.finishLoad(U, 'x', x, false, 9)).toBe(true); // and failed: nothing brings it back
    // No limit: the room alone would refuse it (under 3, the free slots refuse any unload for x).
    expect(await t.beginUnload(U, 'b', 10, TTL, 'x')).not.toBeNull();
  });

  it('a slot free for x is held only by a live room for another adapter not resident yet', async () => {
    // Limit 2, a b loaded: b unloaded for y leaves 1 of 2, the free slot y's: an unload of a for x
    // goes. Once y's room is past its TTL, or y is resident (a poll adopted it), the slot is free.
    for (const [at, adopt] of [
      [60, false],
      [200, false],
      [60, true],
    ] as const) {
      const s = await store();
      for (const n of ['a', 'b']) await loaded(s, n, 1);
      const u = (await s.beginUnload(U, 'b', 2, TTL, 'y', 2))!;
      await s.finishUnload(U, 'b', u, true, 3); // room for y until 103
      // Adopted at start-up (static: no slot), the room's adapter holds nothing.
      if (adopt)
        await s.applySnapshot(
          U,
          poll(50, {
            registry: [
              { name: 'a', path: '/a' },
              { name: 'y', path: '/y' },
            ],
          }),
        );
      if (adopt) expect(await states(s)).toEqual({ a: 'loaded', y: 'static' });
      const next = await s.beginUnload(U, 'a', at, TTL, 'x', 2);
      if (at < 103 && !adopt) expect(next).not.toBeNull();
      else expect(next).toBeNull();
    }
  });

  it("only a trim's unload under way is left out of the count: another adapter's, or one for no one, fills x's room", async () => {
    // Limit 2, a b c loaded (over it): an unload of b under way that makes room for y, or for no one
    // (a trim is granted only while over the limit: begun first), then x's room made leaves 2 of 2,
    // so the room is taken and x's next unload goes. A trim's (its `for` starting with NUL) frees its
    // slot for no one: 1 of 2, x's room free.
    for (const other of ['y', undefined, '\u0000trim']) {
      const s = await store();
      for (const n of ['a', 'b', 'c']) await loaded(s, n, 1);
      expect(await s.beginUnload(U, 'b', 2, TTL, other, 2)).not.toBeNull();
      const ua = (await s.beginUnload(U, 'a', 3, TTL, 'x', 2))!;
      await s.finishUnload(U, 'a', ua, true, 4);
      const next = await s.beginUnload(U, 'c', 5, TTL, 'x', 2);
      if (other?.startsWith('\u0000')) expect(next).toBeNull();
      else expect(next).not.toBeNull();
    }
  });

  it("room made for one adapter outlives the expiry of another's, and a new unload for it replaces its own", async () => {
    const s = await store();
    for (const n of ['a', 'b', 'c', 'd']) await loaded(s, n, 1);
    const ua = (await s.beginUnload(U, 'a', 2, TTL, 'x'))!;
    await s.finishUnload(U, 'a', ua, true, 3); // room for x until 103
    const ub = (await s.beginUnload(U, 'b', 50, 10 * TTL, 'y'))!;
    await s.finishUnload(U, 'b', ub, true, 51); // room for y until 1051
    const uc = (await s.beginUnload(U, 'c', 200, TTL, 'z'))!;
    await s.finishUnload(U, 'c', uc, true, 200); // prunes x's, keeps y's
    expect(await s.beginUnload(U, 'd', 201, TTL, 'y')).toBeNull();
    expect(await s.beginUnload(U, 'd', 201, TTL, 'z')).toBeNull();
    expect(await s.beginUnload(U, 'd', 201, TTL, 'x')).not.toBeNull();
  });
});

describe('MemoryFleetStore: placements', () => {
  it('a placement holds until its TTL ends, to the ms, then the next claim wins', async () => {
    const s = await store(U, V);
    expect(await s.claimPlacement('x', U, undefined, 10, TTL)).toBe(U);
    expect(await s.claimPlacement('x', V, undefined, 10 + TTL - 1, TTL)).toBe(U);
    expect(await s.claimPlacement('x', V, undefined, 10 + TTL, TTL)).toBe(V);
    expect(await s.claimPlacement('x', U, undefined, 10 + TTL, TTL)).toBe(V);
    expect(await s.claimPlacement('y', U, undefined, 10 + TTL, TTL)).toBe(U); // per adapter
  });

  it('a claim on the same replica shares it but does not extend it', async () => {
    const s = await store(U, V);
    expect(await s.claimPlacement('x', U, undefined, 0, TTL, 'r1')).toBe(U);
    expect(await s.claimPlacement('x', U, undefined, 50, TTL, 'r2')).toBe(U);
    expect(await s.claimPlacement('x', V, undefined, TTL, TTL, 'r3')).toBe(V);
  });

  it('a placement without claimers is given back by any release on its replica; one with claimers by the last', async () => {
    const s = await store(U, V);
    await s.claimPlacement('x', U, undefined, 0, TTL);
    await s.releasePlacement('x', U, 'stranger');
    expect(await s.claimPlacement('x', V, undefined, 1, TTL)).toBe(V);
    await s.claimPlacement('y', U, undefined, 0, TTL, 'r1');
    await s.claimPlacement('y', U, undefined, 0, TTL); // shares, names no one
    await s.releasePlacement('y', U);
    expect(await s.claimPlacement('y', V, undefined, 1, TTL)).toBe(V); // a release naming no one ends it
    await s.releasePlacement('z', U, 'r1'); // nothing placed: nothing happens
    expect(await s.claimPlacement('z', U, undefined, 1, TTL)).toBe(U);
  });

  it('shows a placement only on its vLLM replica, and only where the adapter is not resident', async () => {
    const s = await store(U, V);
    await s.upsertReplica({ url: L, backend: 'llamacpp', priority: 0 });
    await s.claimPlacement('x', L, undefined, 0, TTL);
    const [l] = await s.views([L], { name: 'x' });
    expect(l!.adapter).toBeUndefined();
    expect(l!.residentCount).toBe(0);
    await loaded(s, 'y', 1);
    await s.claimPlacement('y', U, undefined, 1, TTL);
    const [u] = await s.views([U], { name: 'y' });
    expect(u!.adapter).toMatchObject({ state: 'loaded' });
    expect(u!.adapter!.placed).toBeUndefined();
    expect(u!.residentCount).toBe(1);
    await s.claimPlacement('z', V, undefined, 1, TTL);
    expect((await s.views([U], { name: 'z' }))[0]!.adapter).toBeUndefined(); // V not asked about
    const [, v] = await s.views([U, V], { name: 'z' });
    expect(v!.adapter).toEqual({ state: 'loading', lastUsed: 0, inFlight: 0, placed: true });
    expect(v!.residentCount).toBe(1);
  });
});

describe('MemoryFleetStore: polls', () => {
  it('applies a poll begun when the newest applied one began, and drops one begun earlier', async () => {
    const s = await store();
    await s.applySnapshot(U, poll(10, { startedAt: 5, load: { ...load, waiting: 1 } }));
    await s.applySnapshot(U, poll(11, { startedAt: 5, load: { ...load, waiting: 2 } }));
    expect((await s.views([U]))[0]).toMatchObject({ waiting: 2, checkedAt: 11, snapshotAt: 11 });
    await s.applySnapshot(U, poll(12, { startedAt: 4, load: { ...load, waiting: 3 } }));
    expect((await s.views([U]))[0]).toMatchObject({ waiting: 2, checkedAt: 11 });
    await s.applySnapshot(U, poll(13, { load: { ...load, waiting: 4 } })); // begun at 13
    await s.applySnapshot(U, poll(14, { startedAt: 12, ok: false, error: 'late' }));
    expect((await s.views([U]))[0]).toMatchObject({ waiting: 4, health: 'up' });
    await s.applySnapshot(V, poll(15)); // unknown replica: nothing
    expect(await s.replicaSpecs()).toEqual([{ url: U, backend: 'vllm', priority: 0 }]);
  });

  it('takes the load figures and llama.cpp list of an ok poll, keeps them through one without', async () => {
    const s = await store();
    await s.applySnapshot(U, poll(1, { load: { ...load, running: 3, waiting: 4, kvUsage: 0.5 } }));
    await s.applySnapshot(U, { at: 2, ok: true });
    expect((await s.views([U]))[0]).toMatchObject({ running: 3, waiting: 4, kvUsage: 0.5, snapshotAt: 2 });
    const list = [{ id: 1, path: '/m/x' }];
    await s.upsertReplica({ url: L, backend: 'llamacpp', priority: 0 });
    await s.applySnapshot(L, { at: 3, ok: true, llamaAdapters: list });
    list[0]!.path = '/m/changed';
    expect((await s.views([L], { name: 'x', path: '/m/x' }))[0]!.adapter).toMatchObject({ llamaId: 1 });
    await s.applySnapshot(L, { at: 4, ok: true });
    expect((await s.dump()).replicas.find((r) => r.url === L)!.llamaAdapters).toEqual([
      { id: 1, path: '/m/x' },
    ]);
  });

  it('a failed poll marks it down once (one event), keeps its figures, and a good one marks it up once', async () => {
    const s = await store();
    await s.applySnapshot(U, poll(1, { load: { ...load, waiting: 7 } }));
    await s.applySnapshot(U, { at: 2, ok: false, error: 'refused' });
    await s.applySnapshot(U, { at: 3, ok: false, error: 'timeout' });
    expect((await s.views([U]))[0]).toMatchObject({
      health: 'down',
      lastError: 'timeout',
      waiting: 7,
      snapshotAt: 1,
      checkedAt: 3,
    });
    await s.applySnapshot(U, poll(4));
    await s.applySnapshot(U, poll(5));
    expect((await s.views([U]))[0]).toMatchObject({ health: 'up', lastError: undefined });
    expect((await s.events(10)).map((e) => [e.op, e.at, e.detail])).toEqual([
      ['replica-down', 2, 'refused'],
      ['replica-up', 4, undefined],
    ]);
  });

  it('a good poll clears the upstream failures counted so far', async () => {
    const s = await store();
    for (let i = 0; i < PASSIVE_FAILURE_LIMIT - 1; i++) await s.reportOutcome(U, false, 1);
    await s.applySnapshot(U, poll(2));
    await s.reportOutcome(U, false, 3);
    expect((await s.views([U]))[0]!.health).toBe('up');
  });

  it('counts a restart by the loaded adapters that left the registry, not the static ones', async () => {
    const s = await store();
    await s.applySnapshot(U, poll(1, { registry: [{ name: 'boot', path: '' }] }));
    await loaded(s, 'a', 2);
    await loaded(s, 'b', 2);
    await s.applySnapshot(U, poll(3, { registry: [] }));
    expect(await states(s)).toEqual({});
    expect((await s.views([U]))[0]!.residentCount).toBe(0);
    expect(await s.events(1)).toEqual([
      {
        at: 3,
        url: U,
        adapter: '',
        op: 'replica-restart',
        result: 'ok',
        detail: '2 loaded adapter(s) left the registry',
      },
    ]);
    await loaded(s, 'c', 4);
    await s.applySnapshot(U, poll(5, { registry: [{ name: 'c', path: '' }] }));
    expect((await s.events(1))[0]!.op).toBe('replica-restart'); // nothing new: no event
    expect(await s.events(10)).toHaveLength(1);
  });

  it('keeps an entry changed when the poll began (the registry read is older), drops one changed before', async () => {
    const s = await store();
    await loaded(s, 'a', 10);
    await loaded(s, 'b', 9);
    await s.applySnapshot(U, poll(12, { startedAt: 10, registry: [] }));
    expect(await states(s)).toEqual({ a: 'loaded' });
  });

  it('classifies a new name as a load when this replica saw a load here or a configuration manages it', async () => {
    const s = await store(U, V);
    const managed = (name: string) => name.startsWith('m-');
    await s.applySnapshot(
      V,
      poll(1, {
        registry: [
          { name: 'm-1', path: '' },
          { name: 'boot', path: '' },
        ],
        managed,
      }),
    );
    expect(await states(s, V)).toEqual({ 'm-1': 'loaded', boot: 'static' });
    await s.applySnapshot(
      V,
      poll(2, {
        registry: [
          { name: 'm-1', path: '' },
          { name: 'boot', path: '' },
        ],
        managed: () => true,
      }),
    );
    expect(await states(s, V)).toEqual({ 'm-1': 'loaded', boot: 'static' }); // no new version: not asked again
    await s.applySnapshot(U, poll(2, { registry: [] }));
    const f = (await s.beginLoad(U, 'x', 3, LIMIT))!;
    await s.finishLoad(U, 'x', f, false, 3);
    await s.applySnapshot(U, poll(5, { startedAt: 4, registry: [{ name: 'other', path: '' }] }));
    expect(await states(s)).toEqual({ other: 'loaded' }); // a load began here once
  });

  it('before the first registry read, a load marks its own name a load, not the start-up ones', async () => {
    // An emptied state: the first read after a load (given up on, landed anyway) on the new record.
    const s = await store();
    const f = (await s.beginLoad(U, 'x', 1, LIMIT))!;
    await s.finishLoad(U, 'x', f, false, 2);
    const reg = [
      { name: 'boot', path: '' },
      { name: 'x', path: '' },
    ];
    await s.applySnapshot(U, poll(5, { startedAt: 4, registry: reg }));
    expect(await states(s)).toEqual({ boot: 'static', x: 'loaded' });
    // That load counts as one begun here: a name new to a later read is a load.
    await s.applySnapshot(U, poll(7, { startedAt: 6, registry: [...reg, { name: 'other', path: '' }] }));
    expect(await states(s)).toEqual({ boot: 'static', x: 'loaded', other: 'loaded' });
  });

  it('asks again about static entries only when the configurations changed, and keeps the others static', async () => {
    const s = await store();
    const reg = [
      { name: 'boot', path: '' },
      { name: 'm-1', path: '' },
    ];
    await s.applySnapshot(U, poll(1, { registry: reg, managedVersion: 1, managed: () => false }));
    expect(await states(s)).toEqual({ boot: 'static', 'm-1': 'static' });
    const managed = (name: string) => name === 'm-1';
    await s.applySnapshot(U, poll(2, { registry: reg, managedVersion: 1, managed }));
    expect(await states(s)).toEqual({ boot: 'static', 'm-1': 'static' });
    await s.applySnapshot(U, poll(3, { registry: reg, managedVersion: 2, managed }));
    expect(await states(s)).toEqual({ boot: 'static', 'm-1': 'loaded' });
    expect((await s.views([U]))[0]!.residentCount).toBe(1);
    const since = (await s.residents(U)).find((r) => r.name === 'm-1')!.since;
    expect(since).toBe(1); // taken over as it was: the same entry
  });
});

describe('MemoryFleetStore: passive health', () => {
  it('marks a replica down at the limit of failures in a row, once, and an answer below 500 resets the count', async () => {
    const s = await store();
    await s.applySnapshot(U, poll(1));
    for (let i = 0; i < PASSIVE_FAILURE_LIMIT - 1; i++) await s.observeOutcome(U, null, 500, 2);
    await s.observeOutcome(U, null, 499, 3);
    for (let i = 0; i < PASSIVE_FAILURE_LIMIT - 1; i++) await s.observeOutcome(U, null, 503, 4);
    expect((await s.views([U]))[0]!.health).toBe('up');
    await s.observeOutcome(U, null, 502, 5);
    expect((await s.views([U]))[0]).toMatchObject({
      health: 'down',
      lastError: `${PASSIVE_FAILURE_LIMIT} upstream failures in a row`,
    });
    for (let i = 0; i < PASSIVE_FAILURE_LIMIT + 1; i++) await s.reportOutcome(U, false, 6);
    const downs = (await s.events(10)).filter((e) => e.op === 'replica-down');
    expect(downs).toEqual([
      {
        at: 5,
        url: U,
        adapter: '',
        op: 'replica-down',
        result: 'error',
        detail: `${PASSIVE_FAILURE_LIMIT} upstream failures in a row`,
      },
    ]);
    await s.reportOutcome(V, false, 7); // unknown: nothing
  });

  it('a replica down by a poll is not marked down again (no second event) by upstream failures', async () => {
    const s = await store();
    await s.applySnapshot(U, { at: 1, ok: false, error: 'refused' });
    for (let i = 0; i < PASSIVE_FAILURE_LIMIT; i++) await s.reportOutcome(U, false, 2);
    expect((await s.views([U]))[0]!.lastError).toBe('refused');
    expect(await s.events(10)).toHaveLength(1);
  });
});

describe('MemoryFleetStore: what a node that decided alone owes', () => {
  it('lists the replicas a poll or upstream failures found down, each as a failed poll begun at its newest poll', async () => {
    const s = await store(U, V, L);
    await s.applySnapshot(U, poll(10, { startedAt: 8 }));
    await s.applySnapshot(U, { at: 20, startedAt: 15, ok: false, error: 'refused' });
    await s.applySnapshot(V, poll(10));
    for (let i = 0; i < PASSIVE_FAILURE_LIMIT; i++) await s.reportOutcome(V, false, 12);
    for (let i = 0; i < PASSIVE_FAILURE_LIMIT; i++) await s.reportOutcome(L, false, 12); // never polled
    expect(s.seenDown(30)).toEqual([
      { url: U, snapshot: { at: 30, startedAt: 15, ok: false, error: 'refused' } },
      {
        url: V,
        snapshot: {
          at: 30,
          startedAt: 10,
          ok: false,
          error: `${PASSIVE_FAILURE_LIMIT} upstream failures in a row`,
        },
      },
    ]);
    await s.applySnapshot(U, poll(40));
    expect(s.seenDown(50).map((d) => d.url)).toEqual([V]);
  });

  it('hands on the monotonic start of the newest poll with each replica seen down or up (seen-down.ts measures on it)', async () => {
    const s = await store(U, V);
    await s.applySnapshot(U, {
      at: 20,
      startedAt: 15,
      monoStartedAt: 115,
      monoAt: 120,
      ok: false,
      error: 'refused',
    });
    await s.applySnapshot(V, poll(10, { startedAt: 8, monoStartedAt: 108, monoAt: 110 }));
    expect(s.seenDown(30)).toEqual([
      { url: U, snapshot: { at: 30, startedAt: 15, monoStartedAt: 115, ok: false, error: 'refused' } },
    ]);
    expect(s.seenUp(30)).toEqual([
      { url: V, snapshot: { at: 30, startedAt: 8, monoStartedAt: 108, ok: true, verdictOnly: true } },
    ]);
  });
});

describe('MemoryFleetStore: leases', () => {
  it("answers a lease with its adapter's state, taken after the views it reads", async () => {
    const s = await store();
    await loaded(s, 'a', 1);
    const got = await s.viewsAndLease([U], { name: 'a' }, { id: 'l1', url: U, adapter: 'a', at: 2 });
    expect(got.state).toBe('loaded');
    expect(got.views[0]).toMatchObject({ inFlight: 0, adapter: { inFlight: 0 } });
    expect((await s.views([U], { name: 'a' }))[0]).toMatchObject({ inFlight: 1, adapter: { inFlight: 1 } });
    expect(await s.acquire({ id: 'l2', url: U, adapter: null, at: 2 })).toBeUndefined();
    expect(await s.acquire({ id: 'l3', url: U, adapter: 'b', at: 2 })).toBeUndefined();
    expect(await s.acquire({ id: 'l4', url: V, adapter: 'a', at: 2 })).toBeUndefined();
    expect(await s.inFlightTotal()).toBe(4);
  });

  it("a release says the adapter is idle only when it was that adapter's last lease there", async () => {
    const s = await store();
    await loaded(s, 'a', 1);
    await s.acquire({ id: 'l1', url: U, adapter: 'a', at: 2 });
    await s.acquire({ id: 'l2', url: U, adapter: 'a', at: 2 });
    await s.acquire({ id: 'b', url: U, adapter: null, at: 2 });
    expect(await s.release('l1', 3)).toEqual({ id: 'l1', url: U, adapter: 'a', at: 2, adapterIdle: false });
    expect(await s.release('b', 3)).toEqual({ id: 'b', url: U, adapter: null, at: 2, adapterIdle: false });
    expect(await s.release('l2', 4)).toEqual({ id: 'l2', url: U, adapter: 'a', at: 2, adapterIdle: true });
    expect(await s.release('l2', 5)).toBeUndefined();
    expect((await s.residents(U))[0]).toMatchObject({ lastUsed: 4, inFlight: 0 });
  });

  it('a release with no status observes nothing; with a 5xx counts a failure', async () => {
    const s = await store();
    await s.applySnapshot(U, poll(1));
    for (let i = 0; i < PASSIVE_FAILURE_LIMIT; i++) {
      await s.acquire({ id: `q${i}`, url: U, adapter: null, at: 2 });
      await s.release(`q${i}`, 3);
    }
    expect((await s.views([U]))[0]!.health).toBe('up');
    for (let i = 0; i < PASSIVE_FAILURE_LIMIT; i++) {
      await s.acquire({ id: `f${i}`, url: U, adapter: 'a', at: 2 });
      await s.release(`f${i}`, 3, 500);
    }
    expect((await s.views([U]))[0]!.health).toBe('down');
  });

  it('reclaims leases by age with one event each, worded as the Redis script words it, returning copies', async () => {
    const s = await store();
    await s.acquire({ id: 'old', url: U, adapter: 'a', at: 0 });
    await s.acquire({ id: 'base', url: U, adapter: null, at: 0 });
    await s.acquire({ id: 'young', url: U, adapter: 'a', at: 90 });
    const out = await s.expireLeases(100, 50);
    expect(out).toEqual([
      { id: 'old', url: U, adapter: 'a', at: 0 },
      { id: 'base', url: U, adapter: null, at: 0 },
    ]);
    const ev = await s.events(10);
    expect(ev.map((e) => [e.op, e.result, e.at, e.url, e.adapter])).toEqual([
      ['lease-expired', 'error', 100, U, 'a'],
      ['lease-expired', 'error', 100, U, ''],
    ]);
    expect(ev[0]!.detail).toMatch(/^lease old /);
    expect(await s.inFlightTotal()).toBe(1);
  });
});

describe('MemoryFleetStore: budgets', () => {
  it('grants `limit` spends a window, answers the wait to its end after, and opens a new window at its end', async () => {
    const s = await store();
    expect(await s.spendBudget('k', 2, 100, 10)).toBe(0);
    expect(await s.spendBudget('k', 2, 100, 20)).toBe(0);
    expect(await s.spendBudget('k', 2, 100, 30)).toBe(80);
    expect(await s.spendBudget('other', 2, 100, 30)).toBe(0); // per key
    expect(await s.spendBudget('k', 2, 100, 109)).toBe(1);
    expect(await s.spendBudget('k', 2, 100, 110)).toBe(0); // a new window from 110
    expect(await s.spendBudget('k', 2, 100, 209)).toBe(0);
    expect(await s.spendBudget('k', 2, 100, 209)).toBe(1);
  });

  it('a limit of 0 refuses every spend', async () => {
    const s = await store();
    expect(await s.spendBudget('k', 0, 100, 10)).toBe(100);
  });
});

describe('MemoryFleetStore: events, specs and dumps', () => {
  it('keeps the newest 200 events, oldest first, and hands out copies', async () => {
    const s = await store();
    for (let i = 0; i < 205; i++)
      await s.pushEvent({ at: i, url: U, adapter: 'a', op: 'load', result: 'ok' });
    const all = await s.events(1000);
    expect(all).toHaveLength(200);
    expect(all[0]!.at).toBe(5);
    expect((await s.events(2)).map((e) => e.at)).toEqual([203, 204]);
    all[199]!.at = -1;
    expect((await s.events(1))[0]!.at).toBe(204);
  });

  it('a spec change replaces the old one and keeps the state; specs are copies', async () => {
    const s = await store();
    await loaded(s, 'a', 1);
    await s.upsertReplica({ url: U, backend: 'vllm', priority: 5 });
    const specs = await s.replicaSpecs();
    expect(specs).toEqual([{ url: U, backend: 'vllm', priority: 5 }]);
    specs[0]!.priority = 9;
    expect((await s.views([U], { name: 'a' }))[0]).toMatchObject({
      priority: 5,
      adapter: { state: 'loaded' },
    });
  });

  it('dumps every replica with its residents and llama.cpp list, without an adapter field', async () => {
    const s = await store();
    await loaded(s, 'a', 1);
    await s.acquire({ id: 'l', url: U, adapter: 'a', at: 2 });
    const [r] = (await s.dump()).replicas;
    expect(r).not.toHaveProperty('adapter');
    expect(r).toMatchObject({ url: U, inFlight: 1, residentCount: 1, llamaAdapters: [] });
    expect(r!.adapters).toEqual([{ name: 'a', state: 'loaded', since: 1, lastUsed: 1, inFlight: 1 }]);
    expect(await s.residents(V)).toEqual([]);
  });

  it('views with residents list them; without, none', async () => {
    const s = await store();
    await loaded(s, 'a', 1);
    expect((await s.views([U], undefined, true))[0]!.residents).toEqual([
      { name: 'a', state: 'loaded', since: 1, lastUsed: 1, inFlight: 0 },
    ]);
    expect((await s.views([U]))[0]!.residents).toBeUndefined();
  });
});

describe('MemoryFleetStore: the cases its first mutation run left', () => {
  it('answers the views of a lease without residents (as the Redis script does)', async () => {
    const s = await store();
    await loaded(s, 'a', 1);
    const got = await s.viewsAndLease([U], { name: 'a' }, { id: 'l', url: U, adapter: 'a', at: 2 });
    expect(got.views[0]!.residents).toBeUndefined();
  });

  it('words the down and up events of a poll whole', async () => {
    const s = await store();
    await s.applySnapshot(U, { at: 2, ok: false, error: 'refused' });
    await s.applySnapshot(U, poll(4));
    expect(await s.events(10)).toEqual([
      { at: 2, url: U, adapter: '', op: 'replica-down', result: 'error', detail: 'refused' },
      { at: 4, url: U, adapter: '', op: 'replica-up', result: 'ok' },
    ]);
  });

  it('asks nothing again on a poll that names no configuration version', async () => {
    const s = await store();
    const reg = [{ name: 'm-1', path: '' }];
    await s.applySnapshot(U, poll(1, { registry: reg, managedVersion: 1, managed: () => false }));
    await s.applySnapshot(U, poll(2, { registry: reg, managed: () => true }));
    expect(await states(s)).toEqual({ 'm-1': 'static' });
  });

  it('a new configuration version turns only static entries into loads, and needs no `managed` to be asked', async () => {
    const s = await store();
    await s.applySnapshot(U, poll(1, { registry: [{ name: 'boot', path: '' }], managedVersion: 1 }));
    const f = (await s.beginLoad(U, 'm-1', 2, LIMIT))!;
    const reg = [
      { name: 'boot', path: '' },
      { name: 'm-1', path: '' },
    ];
    await s.applySnapshot(U, poll(3, { registry: reg, managedVersion: 2 })); // no `managed`: nothing asked
    expect(await states(s)).toEqual({ boot: 'static', 'm-1': 'loading' });
    await s.applySnapshot(U, poll(4, { registry: reg, managedVersion: 3, managed: () => true }));
    expect(await states(s)).toEqual({ boot: 'loaded', 'm-1': 'loading' }); // the load's lock stands
    expect(await s.holds(U, 'm-1', f)).toBe(true);
    expect(await s.finishLoad(U, 'm-1', f, true, 5)).toBe(true);
  });

  it("ends a load only with a load's fence, and an unknown adapter's not at all", async () => {
    const s = await store();
    await loaded(s, 'a', 1);
    const u = (await s.beginUnload(U, 'a', 2, TTL))!;
    expect(await s.finishLoad(U, 'a', u, true, 3)).toBe(false); // the unload's fence
    expect(await states(s)).toEqual({ a: 'unloading' });
    expect(await s.holds(U, 'a', u)).toBe(true);
    expect(await s.finishLoad(U, 'none', u, true, 3)).toBe(false);
    expect(await s.beginUnload(U, 'none', 3, TTL)).toBeNull();
    expect(await s.holds(U, 'none', u)).toBe(false);
  });

  it('unloads made for no adapter, or for an empty name, do not wait for one another', async () => {
    const s = await store();
    for (const n of ['a', 'b', 'c', 'd']) await loaded(s, n, 1);
    expect(await s.beginUnload(U, 'a', 2, TTL)).not.toBeNull();
    expect(await s.beginUnload(U, 'b', 2, TTL)).not.toBeNull();
    expect(await s.beginUnload(U, 'c', 2, TTL, '')).not.toBeNull();
    expect(await s.beginUnload(U, 'd', 2, TTL, '')).not.toBeNull();
  });

  it('a lease on a replica not registered is touched and released without one', async () => {
    const s = await store();
    await s.touch(V, 'a', 1);
    await s.acquire({ id: 'l', url: V, adapter: 'a', at: 1 });
    expect(await s.release('l', 2)).toEqual({ id: 'l', url: V, adapter: 'a', at: 1, adapterIdle: true });
  });

  it("the first claimer of a placement keeps it against a stranger's release", async () => {
    const s = await store(U, V);
    await s.claimPlacement('x', U, undefined, 0, TTL, 'r1');
    await s.releasePlacement('x', U, 'stranger');
    expect(await s.claimPlacement('x', V, undefined, 1, TTL, 'r2')).toBe(U);
    await s.releasePlacement('x', U, 'r1');
    expect(await s.claimPlacement('x', V, undefined, 2, TTL, 'r2')).toBe(V);
  });
});
