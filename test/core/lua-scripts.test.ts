/**
 * The Redis store's Lua (src/fleet/redis/scripts/*.ts) case by case, against a real redis-server:
 * what the differential test (test/core/store-differential.test.ts) cannot see, because the memory
 * store has no such key or its generator never makes such a sequence. Each case kills Lua mutants
 * that `npm run mutation:lua` found surviving (docs/reliability/mutation-testing.md, "The Lua").
 */
import { randomBytes } from 'node:crypto';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import { RedisServer } from '../../harness/redis/server';
import { waitFor } from '../../harness/wait';

const U = 'http://10.0.0.1:8000';
const SPEC = { url: U, backend: 'vllm' as const, priority: 0 };

let redis: RedisServer;
const open: RedisFleetStore[] = [];
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});
afterAll(async () => {
  await redis.close();
});

/** A node's store on a prefix of its own (a fresh state). */
function store(
  prefix = `ls${randomBytes(4).toString('hex')}:`,
  node = 'n1',
): { s: RedisFleetStore; p: string } {
  const s = new RedisFleetStore(redis.config(prefix, { node_ttl_ms: 60_000, timeout: 2000 }), node);
  open.push(s);
  return { s, p: prefix };
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pttl = async (key: string) => Number(await redis.command(['PTTL', key]));

/** `s`'s wake-ups on the change channel from now: subscribed, and any wake-up so far let pass first. */
async function changesFrom(s: RedisFleetStore, p: string): Promise<jest.Mock> {
  const woken = jest.fn();
  s.onRemoteChange = woken;
  await waitFor(async () => (await redis.subscribers(`${p}changed`)) === 1, 5000, 'subscribed');
  await sleep(200);
  woken.mockClear();
  return woken;
}

describe('the cold-load budget (budget.ts)', () => {
  it("a window opens at the first spend, runs from then, and is not pushed back by the window's later spends", async () => {
    const { s, p } = store();
    expect(await s.spendBudget('k', 2, 60_000, 0)).toBe(0);
    // Opened by the first spend (`n == 1`): without it the count would outlive its window until
    // the budget ran out (and the spends of windows past counted against this one).
    const first = await pttl(`${p}budget:k`);
    expect(first).toBeGreaterThan(0);
    expect(first).toBeLessThanOrEqual(60_000);
    await sleep(30);
    expect(await s.spendBudget('k', 2, 60_000, 0)).toBe(0);
    // Not renewed by a later spend within the window: a steady trickle would never let it end.
    expect(await pttl(`${p}budget:k`)).toBeLessThanOrEqual(60_000 - 30);
    // Over the budget: the wait is what is left of the window, which is not opened anew.
    const wait = await s.spendBudget('k', 2, 60_000, 0);
    expect(wait).toBeGreaterThan(0);
    expect(wait).toBeLessThanOrEqual(60_000 - 30);
    expect(await pttl(`${p}budget:k`)).toBeLessThanOrEqual(60_000 - 30);
  });

  it('a count left without a window (its expiry lost) still ends: the spend over it opens one and waits it', async () => {
    const { s, p } = store();
    // As a restore from a snapshot taken between the INCR and the PEXPIRE of an older script might leave it.
    await redis.command(['SET', `${p}budget:k`, '7']);
    const wait = await s.spendBudget('k', 5, 60_000, 0);
    // The window it opens, read back as its time left: a millisecond may pass within the script on a
    // loaded machine (seen in a CI replay: 59,999).
    expect(wait).toBeGreaterThan(60_000 - 30);
    expect(wait).toBeLessThanOrEqual(60_000);
    const left = await pttl(`${p}budget:k`);
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(60_000);
    // Named as the window it now is (a refund needs its name), and the refused spend not counted.
    expect(Number(await redis.command(['GET', `${p}budget-at:k`]))).toBeGreaterThan(0);
    expect(await redis.command(['GET', `${p}budget:k`])).toBe('7');
  });

  it('an outage count added to no window opens one as long as asked, and one added to a window keeps its end', async () => {
    const { s, p } = store();
    await s.addToBudget('k', 3, 60_000);
    const opened = await pttl(`${p}budget:k`);
    expect(opened).toBeGreaterThan(0);
    expect(opened).toBeLessThanOrEqual(60_000);
    await sleep(30);
    await s.addToBudget('k', 2, 60_000);
    expect(await pttl(`${p}budget:k`)).toBeLessThanOrEqual(60_000 - 30);
    expect(await redis.command(['GET', `${p}budget:k`])).toBe('5');
  });
});

describe('budget refunds (budget.ts budgetRefund)', () => {
  it("a refused spend is not counted: the window's count is the units granted", async () => {
    const { s, p } = store();
    expect(await s.spendBudget('k', 1, 60_000, 0)).toBe(0);
    expect(await s.spendBudget('k', 1, 60_000, 0)).toBeGreaterThan(0);
    expect(await redis.command(['GET', `${p}budget:k`])).toBe('1');
  });

  it("a window's opening time names it and ends with it; a refund goes only to the window it names", async () => {
    const { s, p } = store();
    const first = await s.takeBudget('k', 2, 60_000, 0);
    const second = await s.takeBudget('k', 2, 60_000, 0);
    expect(first.window).not.toBeNull();
    expect(second.window).toEqual(first.window);
    expect(await redis.command(['GET', `${p}budget-at:k`])).toBe(String(first.window!.opened));
    // Set in the same script as the count's expiry: they end together. Both read in one script: two
    // reads in turn drifted apart by the time between them (6 ms in a CI run on a loaded machine).
    const [count, name] = (await redis.command([
      'EVAL',
      "return {redis.call('PTTL', KEYS[1]), redis.call('PTTL', KEYS[2])}",
      '2',
      `${p}budget:k`,
      `${p}budget-at:k`,
    ])) as [number, number];
    expect(count).toBeGreaterThan(0);
    expect(Math.abs(count - name)).toBeLessThanOrEqual(2);
    expect(await s.refundBudget({ key: 'k', opened: first.window!.opened - 1 }, 1, 0)).toBe(0);
    expect(await s.refundBudget({ key: 'other', opened: first.window!.opened }, 1, 0)).toBe(0);
    expect(await s.refundBudget(first.window!, 5, 0)).toBe(2);
    expect(await redis.command(['GET', `${p}budget:k`])).toBe('0');
    // The window runs on: a refund neither ends it nor opens another.
    expect(await pttl(`${p}budget:k`)).toBeGreaterThan(0);
    expect((await s.takeBudget('k', 2, 60_000, 0)).window).toEqual(first.window);
  });

  it('a window opened since (the old one ended) takes nothing back for the old one', async () => {
    const { s, p } = store();
    const old = (await s.takeBudget('k', 2, 50, 0)).window!;
    await waitFor(async () => (await redis.command(['EXISTS', `${p}budget:k`])) === 0, 2000, 'window end');
    await sleep(2);
    const now = (await s.takeBudget('k', 2, 60_000, 0)).window!;
    expect(now.opened).toBeGreaterThan(old.opened);
    expect(await s.refundBudget(old, 1, 0)).toBe(0);
    expect(await redis.command(['GET', `${p}budget:k`])).toBe('1');
  });
});

describe('leases (leases.ts)', () => {
  it("a lease released on an upstream 500 counts among the replica's failures in a row; a 499 is an answer", async () => {
    const { s, p } = store();
    await s.upsertReplica(SPEC);
    const health = async () => redis.command(['HGET', `${p}r:${U}`, 'health']);
    let id = 0;
    const served = async (status: number) => {
      const lease = `l${++id}`;
      await s.acquire({ id: lease, url: U, adapter: null, at: id });
      await s.release(lease, id, status);
    };
    // Two 500s, then a 499 (the client went away: the replica answered) ends the run of failures.
    await served(500);
    await served(500);
    await served(499);
    await served(500);
    await served(500);
    expect(await health()).not.toBe('down');
    // The third 500 in a row (PASSIVE_FAILURE_LIMIT, memory-store.ts) marks it down, as the memory store does.
    await served(500);
    expect(await health()).toBe('down');
  });

  it('the sweep ends an expired load lock and takes it out, so no later sweep finds it again', async () => {
    const { s, p } = store();
    await s.upsertReplica(SPEC);
    const fence = await s.beginLoad(U, 'a', 1, 4, 1);
    expect(fence).not.toBeNull();
    await sleep(10);
    await s.expireLeases(10, 60_000);
    // Forgotten (its holder stalled), and its lock gone from both the hash and the expiry set: a
    // lock left behind would be swept again each round, crowding the sweep's 1,000 out.
    expect((await s.residents(U)).map((r) => r.name)).toEqual([]);
    expect(await redis.command(['HLEN', `${p}lock`])).toBe(0);
    expect(await redis.command(['ZCARD', `${p}lock-until`])).toBe(0);
    expect(await s.holds(U, 'a', fence!)).toBe(false);
  });

  it("an expired lock whose change is over ends nothing: not the adapter's live change, nor a sweep over an absent entry", async () => {
    const { s, p } = store();
    await s.upsertReplica(SPEC);
    const live = await s.beginLoad(U, 'a', 1, 4, 60_000);
    // Locks a rollback or a lost reply could leave (their changes over): one naming the adapter
    // under a live load with another fence, one naming an adapter with no entry. Both expired.
    for (const [fence, name] of [
      ['7', 'a'],
      ['8', 'b'],
    ] as const) {
      await redis.command(['HSET', `${p}lock`, fence, JSON.stringify([U, name, 'n0'])]);
      await redis.command(['ZADD', `${p}lock-until`, '0', fence]);
    }
    await s.expireLeases(10, 60_000);
    expect((await s.residents(U)).map((r) => [r.name, r.state])).toEqual([['a', 'loading']]);
    expect(await s.holds(U, 'a', live!)).toBe(true);
    expect(await s.finishLoad(U, 'a', live!, true, 2)).toBe(true);
  });

  it('an expired unload leaves its adapter loaded and says so on the change channel', async () => {
    const { s, p } = store();
    await s.upsertReplica(SPEC);
    const load = await s.beginLoad(U, 'a', 1, 4, 60_000);
    await s.finishLoad(U, 'a', load!, true, 2);
    // Subscribed since the store was made: the load's finish may have woken it already.
    const woken = await changesFrom(s, p);
    expect(await s.beginUnload(U, 'a', 3, 1)).not.toBeNull();
    await sleep(10);
    await s.expireLeases(10, 60_000);
    // Its holder stalled: the adapter is loaded still (a 404 or the next poll corrects it), not
    // left 'unloading' with no lock, which nothing would ever end.
    expect((await s.residents(U)).map((r) => [r.name, r.state])).toEqual([['a', 'loaded']]);
    // Requests waiting for room on the replica are woken (the unload's slot is not coming).
    await waitFor(() => woken.mock.calls.length > 0, 5000, 'woken by the ended unload');
  });

  it("a prune drops the node's leases it no longer holds, not only counts them", async () => {
    const { s, p } = store();
    await s.upsertReplica(SPEC);
    const load = await s.beginLoad(U, 'a', 1, 4, 60_000);
    await s.finishLoad(U, 'a', load!, true, 2);
    await s.acquire({ id: 'kept', url: U, adapter: 'a', at: 3 });
    await s.acquire({ id: 'stale', url: U, adapter: 'a', at: 3 });
    expect(await s.prune(() => ['kept'])).toBe(1);
    // Gone, and uncounted: a stale lease left open would hold the adapter busy (never unloaded).
    expect(await redis.command(['HEXISTS', `${p}lease`, 'stale'])).toBe(0);
    expect(await redis.command(['HGET', `${p}busy:${U}`, 'a'])).toBe('1');
    expect(await s.release('stale', 4)).toBeUndefined();
    expect((await s.release('kept', 4))!.adapterIdle).toBe(true);
    // An id the node's set still names but no lease holds (a state restored from a snapshot) goes too.
    await redis.command(['SADD', `${p}nl:n1`, 'ghost']);
    expect(await s.prune(() => [])).toBe(0);
    expect(await redis.command(['SMEMBERS', `${p}nl:n1`])).toEqual([]);
  });

  it("a prune that dropped leases wakes the change channel (a base-model lease's drop does not on its own)", async () => {
    const { s, p } = store();
    await s.upsertReplica(SPEC);
    await s.acquire({ id: 'stale', url: U, adapter: null, at: 3 });
    const woken = await changesFrom(s, p);
    expect(await s.prune(() => [])).toBe(1);
    // The replica's in-flight count fell: requests waiting on it look again.
    await waitFor(() => woken.mock.calls.length > 0, 5000, 'woken by the prune');
  });

  it("a base-model lease counts in the replica's in-flight only, on no adapter", async () => {
    const { s, p } = store();
    await s.upsertReplica(SPEC);
    await s.acquire({ id: 'base', url: U, adapter: null, at: 3 });
    expect(await redis.command(['HGET', `${p}r:${U}`, 'inFlight'])).toBe('1');
    // No busy count under the empty name, which no release would take back.
    expect(await redis.command(['HGETALL', `${p}busy:${U}`])).toEqual([]);
    // On the base model's renewal set (a busy replica renews it, dst seed 834440), which its release empties.
    expect(await redis.command(['SMEMBERS', `${p}ls:${U}|`])).toEqual(['base']);
    await s.release('base', 4);
    expect(await redis.command(['EXISTS', `${p}ls:${U}|`])).toBe(0);
  });

  it("a lease taken again, or taken with the views, is its node's (a prune finds it)", async () => {
    const { s, p } = store();
    await s.upsertReplica(SPEC);
    expect(await s.retake([{ id: 'back', url: U, adapter: null, at: 1 }])).toEqual([]);
    await s.viewsAndLease([U], undefined, { id: 'viewed', url: U, adapter: null, at: 2 });
    const node = async (id: string) =>
      (JSON.parse(String(await redis.command(['HGET', `${p}lease`, id]))) as { node: string }).node;
    expect(await node('back')).toBe('n1');
    expect(await node('viewed')).toBe('n1');
    expect((await redis.command(['SMEMBERS', `${p}nl:n1`])) as string[]).toEqual(
      expect.arrayContaining(['back', 'viewed']),
    );
  });

  it("a stopped node's locks end, a live node's do not", async () => {
    const { s, p } = store();
    await s.upsertReplica(SPEC);
    const live = await s.beginLoad(U, 'a', 1, 4, 60_000);
    // A node whose last heartbeat is long past node_ttl_ms, holding a load of its own.
    await redis.command(['ZADD', `${p}nodes`, '0', 'n0']);
    await redis.command(['HSET', `${p}lock`, '5', JSON.stringify([U, 'b', 'n0'])]);
    await redis.command(['ZADD', `${p}lock-until`, String(Date.now() + 60_000), '5']);
    await s.expireLeases(10, 60_000);
    expect(await redis.command(['HKEYS', `${p}lock`])).toEqual([String(live)]);
    expect(await s.holds(U, 'a', live!)).toBe(true);
  });

  it('an expiry entry with no lock (its lock ended by another path) is taken out by the sweep', async () => {
    const { s, p } = store();
    await redis.command(['ZADD', `${p}lock-until`, '0', '9']);
    await s.expireLeases(10, 60_000);
    expect(await redis.command(['ZCARD', `${p}lock-until`])).toBe(0);
  });
});

describe('load locks (load-locks.ts)', () => {
  it('a load ended static before the first registry read is no load of ours: names new to later reads stay static', async () => {
    const { s } = store();
    await s.upsertReplica(SPEC);
    // Before any registry read (an emptied state): the load is noted as one of ours until it ends.
    const fence = await s.beginLoad(U, 'boot', 1, 4, 60_000);
    expect(await s.finishLoad(U, 'boot', fence!, 'static', 2)).toBe(true);
    // The reads, no configurations known (managed unknown): nothing here was ever the router's load,
    // so a name new to the second is a start-up adapter too, not one to trim.
    const t0 = await s.sharedTime();
    const entries = (...names: string[]) => names.map((name) => ({ name, path: `/${name}` }));
    await s.applySnapshot(U, {
      at: 3,
      startedAt: 3,
      sharedStartedAt: t0 + 10_000,
      ok: true,
      registry: entries('boot'),
    });
    await s.applySnapshot(U, {
      at: 4,
      startedAt: 4,
      sharedStartedAt: t0 + 20_000,
      ok: true,
      registry: entries('boot', 'late'),
    });
    const states = Object.fromEntries((await s.residents(U)).map((r) => [r.name, r.state]));
    expect(states).toEqual({ boot: 'static', late: 'static' });
  });

  it('an unload that ends says so on the change channel', async () => {
    const { s, p } = store();
    await s.upsertReplica(SPEC);
    const load = await s.beginLoad(U, 'a', 1, 4, 60_000);
    await s.finishLoad(U, 'a', load!, true, 2);
    const woken = await changesFrom(s, p);
    const unload = await s.beginUnload(U, 'a', 3, 60_000);
    expect(await s.finishUnload(U, 'a', unload!, true, 4)).toBe(true);
    // Requests waiting for room on the replica look again: the slot is free.
    await waitFor(() => woken.mock.calls.length > 0, 5000, 'woken by the ended unload');
  });
});
