/**
 * Kong's own 502/504 (src/router/log-phase.ts `proxyFailed`) marks the replica down in the store
 * at once: over every poll begun before it, whichever store, until a poll begun after it answers.
 * A real redis-server for the shared store (its snapshot script dates the marking on Redis's clock).
 * The memory store (a node's own, and its local store deciding alone) orders one process's polls
 * and markings on its monotonic clock: a skew correction stepping its wall clock moves neither.
 */
import { randomBytes } from 'node:crypto';
import { systemClock } from '../../src/clock';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import type { FleetStore } from '../../src/fleet/store';
import { proxyFailed } from '../../src/router/log-phase';
import type { FleetRuntime } from '../../src/runtime';
import { useRedisStores } from '../helpers/redis-stores';
import { SteppedClock } from './helpers';

const U = 'http://10.0.0.1:8000';
const load = { waiting: 0, running: 0, activeAdapters: [], malformedLines: 0 };
const env = useRedisStores();

interface Node {
  store: FleetStore;
  /** A poll begun `agoMs` before now (on the store's clock: Redis's for the shared one), answered up now. */
  polledUp(agoMs: number): Promise<void>;
}

async function memoryNode(): Promise<Node> {
  const store = new MemoryFleetStore();
  await store.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  return {
    store,
    polledUp: (agoMs) => {
      const now = systemClock.now();
      return store.applySnapshot(U, { at: now, startedAt: now - agoMs, ok: true, load });
    },
  };
}

async function redisNode(): Promise<Node> {
  const p = `lr${randomBytes(4).toString('hex')}:`;
  const store = new RedisFleetStore(env.redis.config(p, { node_ttl_ms: 60_000, timeout: 2000 }), 'n1');
  env.open.push(store);
  await store.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  return {
    store,
    polledUp: async (agoMs) => {
      const now = systemClock.now();
      const sharedStartedAt = (await store.sharedTime()) - agoMs;
      await store.applySnapshot(U, { at: now, startedAt: now - agoMs, sharedStartedAt, ok: true, load });
    },
  };
}

const health = async (s: FleetStore) => (await s.views([U]))[0]!.health;
/** The log phase's marking, on a runtime of this store (proxyFailed reads its clock and store only). */
const marked = (s: FleetStore) =>
  proxyFailed({ clock: systemClock, store: s } as unknown as FleetRuntime, U, 502);

describe.each([
  ['the memory store', memoryNode],
  ['the Redis store', redisNode],
])("Kong's own 502 in %s", (_name, node) => {
  it('marks the replica down over an up poll begun 20 ms before it (any node polls every second)', async () => {
    const n = await node();
    await n.polledUp(20);
    expect(await health(n.store)).toBe('up');
    await marked(n.store);
    expect(await health(n.store)).toBe('down');
  });

  it('holds against a poll begun before it that answers after it, and yields to one begun after it', async () => {
    const n = await node();
    await marked(n.store);
    await n.polledUp(20);
    expect(await health(n.store)).toBe('down');
    // A poll begun once the marking reached the store (not before it) brings the replica back.
    await n.polledUp(0);
    expect(await health(n.store)).toBe('up');
  });
});

describe('the memory store on a node whose wall clock is stepped back', () => {
  const clock = new SteppedClock();
  let store: MemoryFleetStore;
  /** A poll of this process begun at `began` (true time), its answer applied now. */
  const polled = (began: { wall: number; mono: number }, ok: boolean) =>
    store.applySnapshot(U, {
      at: clock.now(),
      startedAt: began.wall,
      monoStartedAt: began.mono,
      monoAt: clock.monotonic(),
      ok,
      ...(ok ? { load } : { error: 'connection refused' }),
    });
  const begin = () => ({ wall: clock.now(), mono: clock.monotonic() });
  const markOn = () => proxyFailed({ clock, store } as unknown as FleetRuntime, U, 502);

  beforeEach(async () => {
    clock.t = 1000;
    clock.skew = 0;
    store = new MemoryFleetStore(clock);
    await store.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  });

  // Seed 2902860: polled up from 1,034.9, the clock stepped back 141 ms at 1,077, the 502 at 1,100
  // dated 959 and dropped as older than that poll; the node, deciding alone, routed there again.
  it("holds Kong's marking over an up poll begun before it, before the step", async () => {
    clock.t = 1035;
    const began = begin();
    await polled(began, true);
    clock.t = 1077;
    clock.skew = -141;
    clock.t = 1100;
    await markOn();
    expect(await health(store)).toBe('down');
  });

  it('holds it against such a poll answering after it, and yields to one begun after it', async () => {
    clock.t = 1050;
    const before = begin();
    clock.skew = -141;
    clock.t = 1100;
    await markOn();
    clock.t = 1120;
    await polled(before, true);
    expect(await health(store)).toBe('down');
    clock.t = 1130;
    await polled(begin(), true);
    expect(await health(store)).toBe('up');
  });

  it('applies a poll begun after the step over one begun before it', async () => {
    await polled(begin(), true);
    clock.skew = -141;
    clock.t = 1100;
    await polled(begin(), false);
    expect(await health(store)).toBe('down');
  });
});
