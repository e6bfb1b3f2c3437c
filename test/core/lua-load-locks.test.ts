/**
 * The load-lock Lua (src/fleet/redis/scripts/load-locks.ts) case by case, against a real
 * redis-server: the grant of an unload (one per load, the rooms, the trims) and the room an ended
 * unload makes, where the other real-Redis suites let a mutant through (`npm run mutation:lua --
 * load-locks`, docs/reliability/mutation-testing.md, "The Lua"). lua-scripts.test.ts holds the
 * other scripts' cases, lua-residency.test.ts residency.ts's.
 */
import { randomBytes } from 'node:crypto';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import { waitFor } from '../../harness/wait';
import { useRedisStores } from '../helpers/redis-stores';

const U = 'http://10.0.0.1:8000';
const TTL = 60_000;
/** A trim's `for`: it starts with NUL, never an adapter's name (src/adapters). */
const TRIM = '\u0000excess';

const env = useRedisStores();

/** A node's store on a prefix of its own (a fresh state), the replica registered. */
async function store(): Promise<{ s: RedisFleetStore; p: string }> {
  const p = `ll${randomBytes(4).toString('hex')}:`;
  const s = new RedisFleetStore(env.redis.config(p, { node_ttl_ms: 60_000, timeout: 2000 }), 'n1');
  env.open.push(s);
  await s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  return { s, p };
}

/** Loads `names` one after the other (no limit): each ends loaded. */
async function loaded(s: RedisFleetStore, ...names: string[]): Promise<void> {
  for (const [i, name] of names.entries()) {
    const f = await s.beginLoad(U, name, 1 + i, 100, TTL);
    expect(f).not.toBeNull();
    expect(await s.finishLoad(U, name, f!, true, 1 + i)).toBe(true);
  }
}

const states = async (s: RedisFleetStore) =>
  Object.fromEntries((await s.residents(U)).map((r) => [r.name, r.state]));

describe('an unload granted or refused (beginUnload)', () => {
  it('an unload for no adapter waits on nothing but its own adapter: two at once on one replica both go', async () => {
    // The store's contract (store.ts): without `forAdapter`, no room is made, so no other unload
    // under way is a reason to refuse (the memory store's reading too). The router names one always.
    const { s } = await store();
    await loaded(s, 'a', 'b');
    expect(await s.beginUnload(U, 'a', 5, TTL)).not.toBeNull();
    expect(await s.beginUnload(U, 'b', 6, TTL)).not.toBeNull();
    expect(await states(s)).toEqual({ a: 'unloading', b: 'unloading' });
  });

  it('an unload under way for x refuses a second one for x: one unload per load, though the replica reads full', async () => {
    // Two nodes read the replica full (2 of 2) and each makes room for x: the second is refused
    // while the first is under way, not only once it has ended (the room it made).
    const { s } = await store();
    await loaded(s, 'a', 'b');
    const ua = await s.beginUnload(U, 'a', 5, TTL, 'x', 2);
    expect(ua).not.toBeNull();
    expect(await s.beginUnload(U, 'b', 6, TTL, 'x', 2)).toBeNull();
    // One for y goes: the unload under way is x's, and frees its slot for x, not for no one as a
    // trim's does (counted off the replica's count, it read 1 of 2: a slot free, load into it).
    expect(await s.beginUnload(U, 'b', 7, TTL, 'y', 2)).not.toBeNull();
  });

  it('a trim under way frees the room made for x: a second unload for x is refused, whatever other rooms hold', async () => {
    // Limit 3, five loaded: a trim takes c, d unloads for y, e for x; 3 counted, c's trim among them.
    // c's slot is x's room (2 of 3 once c is gone), so a second unload for x is one too many; y's room,
    // which holds a slot of its own, must not make the replica read full.
    const { s } = await store();
    await loaded(s, 'a', 'b', 'c', 'd', 'e');
    expect(await s.beginUnload(U, 'c', 10, TTL, TRIM, 3)).not.toBeNull();
    for (const [i, [name, room]] of [
      ['d', 'y'],
      ['e', 'x'],
    ].entries()) {
      const u = await s.beginUnload(U, name!, 11 + i * 2, TTL, room, 3);
      expect(u).not.toBeNull();
      expect(await s.finishUnload(U, name!, u!, true, 12 + i * 2)).toBe(true);
    }
    expect(await s.beginUnload(U, 'a', 15, TTL, 'x', 3)).toBeNull();
  });

  it('a trim under way frees a slot for the next load: an unload for x is refused when no room holds it', async () => {
    // Limit 2, a b c loaded: a trim takes c; b then goes (a 404). a and c are counted, c's trim among
    // them: 1 of 2 once it ends, so x loads into c's slot and nothing is unloaded for it.
    const { s } = await store();
    await loaded(s, 'a', 'b', 'c');
    expect(await s.beginUnload(U, 'c', 10, TTL, TRIM, 2)).not.toBeNull();
    await s.forget(U, 'b', 11);
    expect(await states(s)).toEqual({ a: 'loaded', c: 'unloading' });
    expect(await s.beginUnload(U, 'a', 12, TTL, 'x', 2)).toBeNull();
  });
});

describe('the room an ended unload makes (finishUnload)', () => {
  it('rooms expire with the longest made, and a short one made later does not end a longer one before it', async () => {
    const { s, p } = await store();
    await loaded(s, 'a', 'b', 'c');
    const ua = await s.beginUnload(U, 'a', 5, TTL, 'x', 3);
    expect(await s.finishUnload(U, 'a', ua!, true, 6)).toBe(true);
    // The rooms' hash expires (its entries each end; nothing else takes the ended ones out).
    const left = Number(await env.redis.command(['PTTL', `${p}made:${U}`]));
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(TTL);
    // Another policy's room, 1 ms: the hash keeps x's end, so x's room outlives z's.
    const ub = await s.beginUnload(U, 'b', 7, 1, 'z', 3);
    expect(await s.finishUnload(U, 'b', ub!, true, 8)).toBe(true);
    await new Promise((r) => setTimeout(r, 20));
    // No limit: a room made for x refuses until its TTL (one unload per load).
    expect(await s.beginUnload(U, 'c', 9, TTL, 'x')).toBeNull();
  });
});

describe('a load that ends (finishLoad)', () => {
  it('says so on the change channel, a replayed end too: requests waiting on its `loading` entry look again', async () => {
    // A replayed end (ended-locks.ts, dst seed 1534246) ends a lock the server had kept since a
    // rollback: the requests waiting on that `loading` entry would be left to their timers.
    const { s, p } = await store();
    const woken = jest.fn();
    s.onRemoteChange = woken;
    await waitFor(async () => (await env.redis.subscribers(`${p}changed`)) === 1, 5000, 'subscribed');
    for (const [name, end] of [
      ['a', true],
      ['b', 'replayed'],
    ] as const) {
      const f = await s.beginLoad(U, name, 1, 100, TTL);
      woken.mockClear();
      expect(await s.finishLoad(U, name, f!, end, 2)).toBe(true);
      await waitFor(() => woken.mock.calls.length > 0, 5000, `woken by the load's end (${end})`);
    }
    expect(await states(s)).toEqual({ a: 'loaded' });
  });
});
