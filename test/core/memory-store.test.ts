import { MemoryFleetStore, PASSIVE_FAILURE_LIMIT } from '../../src/fleet/memory-store';

const U = 'http://10.0.0.1:8000';
const load = { running: 1, waiting: 2, kvUsage: 0.3, activeAdapters: [], malformedLines: 0 };

async function store() {
  const s = new MemoryFleetStore();
  await s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  return s;
}
const states = async (s: MemoryFleetStore) =>
  Object.fromEntries((await s.residents(U)).map((r) => [r.name, r.state]));

describe('MemoryFleetStore', () => {
  it('classifies adapters in the first registry as static, later ones (another router) as loaded', async () => {
    const s = await store();
    await s.applySnapshot(U, { at: 1, ok: true, load, registry: [{ name: 'boot', path: '/a/boot' }] });
    expect(await states(s)).toEqual({ boot: 'static' });
    expect(await s.beginLoad(U, 'mine', 2)).toBe(true);
    await s.finishLoad(U, 'mine', true, 3);
    await s.applySnapshot(U, {
      at: 4,
      ok: true,
      load,
      registry: [
        { name: 'boot', path: '' },
        { name: 'mine', path: '' },
        { name: 'theirs', path: '' },
      ],
    });
    expect(await states(s)).toEqual({ boot: 'static', mine: 'loaded', theirs: 'loaded' });
    const [v] = await s.views([U], { name: 'theirs' });
    expect(v).toMatchObject({
      health: 'up',
      snapshotAt: 4,
      waiting: 2,
      running: 1,
      kvUsage: 0.3,
      residentCount: 2,
      adapter: { state: 'loaded' },
    });
  });

  it('forgets adapters that leave the registry (a restart), but keeps a load in progress', async () => {
    const s = await store();
    await s.applySnapshot(U, { at: 1, ok: true, registry: [{ name: 'boot', path: '' }] });
    await s.beginLoad(U, 'x', 2);
    await s.finishLoad(U, 'x', true, 3);
    await s.beginLoad(U, 'pending', 4);
    await s.applySnapshot(U, { at: 5, ok: true, registry: [{ name: 'boot', path: '' }] });
    expect(await states(s)).toEqual({ boot: 'static', pending: 'loading' });
    expect((await s.events(10)).map((e) => e.op)).toEqual(['replica-restart']);
  });

  it('marks a replica down on a failed poll and up again on the next good one, keeping checkedAt current', async () => {
    const s = await store();
    await s.applySnapshot(U, { at: 1, ok: true, load });
    await s.applySnapshot(U, { at: 2, ok: false, error: 'ECONNREFUSED' });
    expect((await s.views([U]))[0]).toMatchObject({
      health: 'down',
      snapshotAt: 1,
      checkedAt: 2,
      lastError: 'ECONNREFUSED',
    });
    await s.applySnapshot(U, { at: 3, ok: true, load });
    expect((await s.views([U]))[0]).toMatchObject({ health: 'up', snapshotAt: 3 });
    expect((await s.events(10)).map((e) => e.op)).toEqual(['replica-down', 'replica-up']);
  });

  it('marks a replica down after consecutive upstream failures from the proxy path', async () => {
    const s = await store();
    await s.applySnapshot(U, { at: 1, ok: true, load });
    for (let i = 0; i < PASSIVE_FAILURE_LIMIT - 1; i++) await s.reportOutcome(U, false, 2);
    await s.reportOutcome(U, true, 2);
    await s.reportOutcome(U, false, 2);
    expect((await s.views([U]))[0]!.health).toBe('up');
    for (let i = 0; i < PASSIVE_FAILURE_LIMIT; i++) await s.reportOutcome(U, false, 3);
    expect((await s.views([U]))[0]!.health).toBe('down');
  });

  it('lets exactly one caller begin a load; unload only when idle and loaded', async () => {
    const s = await store();
    expect(await s.beginLoad(U, 'a', 1)).toBe(true);
    expect(await s.beginLoad(U, 'a', 1)).toBe(false);
    expect(await s.beginUnload(U, 'a', 2)).toBe(false); // still loading
    await s.finishLoad(U, 'a', true, 2);
    await s.acquire({ id: 'L1', url: U, adapter: 'a', at: 3 });
    expect(await s.beginUnload(U, 'a', 4)).toBe(false); // busy
    await s.release('L1', 5);
    expect(await s.beginUnload(U, 'a', 6)).toBe(true);
    expect(await s.beginLoad(U, 'a', 6)).toBe(false); // unloading still occupies it
    await s.finishUnload(U, 'a', false, 7);
    expect(await states(s)).toEqual({ a: 'loaded' });
    await s.beginUnload(U, 'a', 8);
    await s.finishUnload(U, 'a', true, 9);
    expect(await states(s)).toEqual({});
  });

  it('counts in-flight leases per replica and adapter, releases each once, and touches recency on release', async () => {
    const s = await store();
    await s.beginLoad(U, 'a', 0);
    await s.finishLoad(U, 'a', true, 0);
    await s.acquire({ id: 'L1', url: U, adapter: 'a', at: 1 });
    await s.acquire({ id: 'L2', url: U, adapter: null, at: 1 });
    await s.acquire({ id: 'L1', url: U, adapter: 'a', at: 1 }); // idempotent
    expect((await s.views([U], { name: 'a' }))[0]).toMatchObject({ inFlight: 2, adapter: { inFlight: 1 } });
    expect(await s.release('L1', 50)).toMatchObject({ id: 'L1', adapter: 'a' });
    expect(await s.release('L1', 51)).toBeUndefined();
    expect((await s.residents(U))[0]).toMatchObject({ name: 'a', lastUsed: 50, inFlight: 0 });
    expect(await s.inFlightTotal()).toBe(1);
  });

  it('reclaims leases older than the maximum age, and only those', async () => {
    const s = await store();
    await s.acquire({ id: 'old', url: U, adapter: 'a', at: 0 });
    await s.acquire({ id: 'young', url: U, adapter: 'a', at: 900 });
    expect((await s.expireLeases(1000, 500)).map((l) => l.id)).toEqual(['old']);
    expect(await s.release('old', 1001)).toBeUndefined();
    expect(await s.inFlightTotal()).toBe(1);
    expect((await s.events(5)).at(-1)).toMatchObject({ op: 'lease-expired', adapter: 'a' });
  });

  it('hands out copies: mutating a view changes nothing inside', async () => {
    const s = await store();
    const [v] = await s.views([U]);
    v!.waiting = 99;
    (await s.replicaSpecs())[0]!.priority = 5;
    expect((await s.views([U]))[0]!.waiting).toBe(0);
    expect((await s.replicaSpecs())[0]!.priority).toBe(0);
  });

  it('finds a llama.cpp adapter by path or file name, with its id', async () => {
    const s = new MemoryFleetStore();
    const L = 'http://10.0.0.2:8080';
    await s.upsertReplica({ url: L, backend: 'llamacpp', priority: 0 });
    await s.applySnapshot(L, {
      at: 1,
      ok: true,
      llamaAdapters: [
        { id: 0, path: 'a.gguf' },
        { id: 1, path: '/models/lora/sql.gguf' },
      ],
    });
    const presence = async (path?: string) => (await s.views([L], { name: 'x', path }))[0]!.adapter;
    expect(await presence('/models/lora/sql.gguf')).toMatchObject({ state: 'static', llamaId: 1 });
    expect(await presence('/elsewhere/sql.gguf')).toMatchObject({ llamaId: 1 });
    expect(await presence('/models/a.gguf')).toMatchObject({ llamaId: 0 });
    expect(await presence('b.gguf')).toBeUndefined();
    expect(await presence(undefined)).toBeUndefined();
  });

  it('takes registry entries a configuration manages as loaded even in a fresh process (plugin-server restart)', async () => {
    const s = await store();
    await s.applySnapshot(U, {
      at: 1,
      ok: true,
      registry: [
        { name: 'mine', path: '/adapters/mine' },
        { name: 'boot', path: '/m/boot' },
      ],
      managed: (name, path) => name === 'mine' && path === '/adapters/mine',
    });
    expect(await states(s)).toEqual({ mine: 'loaded', boot: 'static' });
    expect((await s.views([U]))[0]!.residentCount).toBe(1);
    // Asked only about names the store does not know yet: a poll of a known registry costs nothing.
    const asked: string[] = [];
    const registry = [
      { name: 'mine', path: '/adapters/mine' },
      { name: 'boot', path: '/m/boot' },
      { name: 'new', path: '/x' },
    ];
    await s.applySnapshot(U, { at: 2, ok: true, registry, managed: (n) => (asked.push(n), false) });
    expect(asked).toEqual(['new']);
  });

  it('does not let a registry read before an unload revive the adapter, nor one read before a load drop it', async () => {
    const s = await store();
    await s.applySnapshot(U, { at: 1, ok: true, registry: [] });
    await s.beginLoad(U, 'old', 2);
    await s.finishLoad(U, 'old', true, 3);
    // A scrape starts at 10 (old is registered), the router unloads old at 12, the scrape lands at 15.
    await s.beginUnload(U, 'old', 11);
    await s.finishUnload(U, 'old', true, 12);
    await s.applySnapshot(U, { at: 15, startedAt: 10, ok: true, registry: [{ name: 'old', path: '' }] });
    expect(await states(s)).toEqual({});
    // A scrape starts at 20 (new not yet registered), new finishes loading at 22, the scrape lands at 25.
    await s.beginLoad(U, 'new', 21);
    await s.finishLoad(U, 'new', true, 22);
    await s.applySnapshot(U, { at: 25, startedAt: 20, ok: true, registry: [] });
    expect(await states(s)).toEqual({ new: 'loaded' });
    // A later registry is the truth again.
    await s.applySnapshot(U, { at: 31, startedAt: 30, ok: true, registry: [{ name: 'old', path: '' }] });
    expect(await states(s)).toEqual({ old: 'loaded' });
  });

  it('forgets a loaded adapter a replica answered 404 for, but not a static one', async () => {
    const s = await store();
    await s.applySnapshot(U, { at: 1, ok: true, registry: [{ name: 'boot', path: '' }] });
    await s.beginLoad(U, 'x', 2);
    await s.finishLoad(U, 'x', true, 3);
    await s.forget(U, 'x', 4);
    await s.forget(U, 'boot', 4);
    expect(await states(s)).toEqual({ boot: 'static' });
  });

  it('keeps the count of slot-occupying adapters equal to a recount through every transition', async () => {
    const s = await store();
    const check = async () => {
      const recount = (await s.residents(U)).filter((r) => r.state !== 'static').length;
      expect((await s.views([U]))[0]!.residentCount).toBe(recount);
    };
    await s.applySnapshot(U, {
      at: 1,
      ok: true,
      registry: [
        { name: 'boot', path: '' },
        { name: 'm', path: '' },
      ],
      managed: (name) => name === 'm',
    });
    await check();
    await s.beginLoad(U, 'a', 2);
    await check();
    await s.finishLoad(U, 'a', true, 3);
    await s.beginLoad(U, 'b', 4);
    await s.finishLoad(U, 'b', false, 5);
    await check();
    await s.beginUnload(U, 'a', 6);
    await check();
    await s.finishUnload(U, 'a', false, 7);
    await s.beginUnload(U, 'a', 8);
    await s.finishUnload(U, 'a', true, 9);
    await check();
    await s.forget(U, 'm', 10);
    await s.applySnapshot(U, { at: 12, startedAt: 11, ok: true, registry: [] });
    await check();
    expect((await s.views([U]))[0]!.residentCount).toBe(0);
  });
});
