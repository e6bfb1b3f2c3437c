/**
 * The in-process store and the Redis store's scripts answer alike: generated sequences of store
 * operations from several nodes run against a MemoryFleetStore and against one RedisFleetStore
 * per node on a real redis-server (one prefix), and every answer and the state any caller can
 * see are compared after each step. The deterministic simulation runs on the memory store; this
 * is what lets it speak for Redis too.
 *
 * Time: the scripts read Redis's clock (TIME), the memory store the `at` it is given. Each step
 * takes `at` from Redis's clock just before it and the next step begins at least 2 ms later, so
 * both stores order residency changes, unloads and the start of polls alike. Durations that end
 * by a clock (lock TTLs, placements, budget windows, lease ages) are chosen so that nothing ends
 * during a run (or, for lease ages, everything has): only a budget's wait is measured on two
 * clocks, and is compared as "waits, at most a window".
 *
 * Replay a failure: STORE_DIFF_SEED=<seed> STORE_DIFF_PATH=<path> (both as fast-check prints
 * them) reruns the shrunk sequence alone; STORE_DIFF_RUNS=<n> runs more sequences.
 */
import fc from 'fast-check';
import { randomBytes } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import type { ReplicaView } from '../../src/fleet/types';
import { RedisServer } from '../../harness/redis/server';
import {
  ADAPTERS,
  NODES,
  newWorld,
  nodeId,
  noteStep,
  observe,
  opArb,
  plain,
  registerAll,
  resolve,
  runStep,
  type Op,
  type World,
  URLS,
} from '../helpers/store-ops';

const SEED = Number(process.env.STORE_DIFF_SEED ?? 3131);
const RUNS = Number(process.env.STORE_DIFF_RUNS ?? 50);
const MAX_STEPS = 60;

let redis: RedisServer;
beforeAll(async () => {
  redis = await RedisServer.start();
});
afterAll(async () => {
  await redis.close();
});

/** Both sides afresh: a new memory store, and new Redis nodes on an emptied server. */
async function freshSides(): Promise<{ memory: MemoryFleetStore; nodes: RedisFleetStore[] }> {
  await redis.command(['FLUSHALL']);
  const prefix = `d${randomBytes(3).toString('hex')}:`;
  const nodes = Array.from(
    { length: NODES },
    (_, i) => new RedisFleetStore(redis.config(prefix, { node_ttl_ms: 60_000, timeout: 2000 }), nodeId(i)),
  );
  return { memory: new MemoryFleetStore(), nodes };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Counts of what the property ran, for the report. */
const ran = {
  sequences: 0,
  steps: 0,
  granted: {} as Record<string, number>,
  rooms: {} as Record<string, number>,
};

/**
 * The case an unload for another adapter meets, read from the memory store before it runs: a room
 * made for that adapter or not, the replica full by the caller's limit or not, and whether the
 * unload was granted. Read from the store's private map: the contract has no call that shows it.
 */
async function roomCase(memory: MemoryFleetStore, op: Op, at: number): Promise<string | null> {
  if (op.op !== 'beginUnload' || op.for === null || op.limit === null) return null;
  const url = URLS[op.url]!;
  const rooms = (memory as unknown as { roomMade: Map<string, Map<string, number>> }).roomMade;
  const made = (rooms.get(url)?.get(ADAPTERS[op.for]!) ?? -Infinity) > at ? 'made' : 'none';
  const count = (await memory.views([url]))[0]?.residentCount ?? 0;
  return `${made} ${count >= op.limit ? 'full' : 'free'}`;
}

/** Counts the steps that changed something (a fence handed out, a change finished, a lease released). */
function tally(op: Op, answer: unknown): void {
  const granted = (op.op === 'beginLoad' || op.op === 'beginUnload') && typeof answer === 'number';
  const done =
    ((op.op === 'finishLoad' || op.op === 'finishUnload') && answer === true) ||
    (op.op === 'release' && answer !== null) ||
    (op.op === 'retake' && op.leases.length > 0) ||
    (op.op === 'budget' && (answer as { granted?: unknown }).granted !== undefined) ||
    (op.op === 'refund' && (answer as { refunded: number }).refunded > 0) ||
    (op.op === 'retain' && (answer as string[]).length > 0);
  if (granted || done) ran.granted[op.op] = (ran.granted[op.op] ?? 0) + 1;
}

/** A fence handed out, whichever: each side's clock sets its value (`World.fences`). */
const asFence = (x: unknown) => (typeof x === 'number' ? 'fence' : x);

/** Each side's fence exceeds every one it handed out before, across flushes too (no holder's can repeat). */
function newFences(op: Op, w: World, m: unknown, r: unknown, where: () => string): void {
  if (op.op !== 'beginLoad' && op.op !== 'beginUnload') return;
  if (typeof m !== 'number' || typeof r !== 'number') return;
  const last = w.fences.at(-1);
  if (last && (m <= last.fence || r <= last.shared))
    throw new Error(
      `${where()}: fence handed out again or lower: memory ${m} after ${last.fence}, redis ${r} after ${last.shared}`,
    );
}

/**
 * Every node's own leases per replica (ReplicaView.ownInFlight), not only the stepping node's: each
 * lease id names one of the nodes, so they add up to the replica's in-flight count (thrown otherwise).
 */
async function ownCounts(read: (node: number) => Promise<ReplicaView[]>): Promise<unknown> {
  const perNode: Record<string, number | undefined>[] = [];
  for (let i = 0; i < NODES; i++)
    perNode.push(Object.fromEntries((await read(i)).map((v) => [v.url, v.ownInFlight])));
  for (const v of await read(0)) {
    const sum = perNode.reduce((n, counts) => n + (counts[v.url] ?? 0), 0);
    if (sum !== v.inFlight)
      throw new Error(`${v.url}: per-node counts add up to ${sum}, in flight ${v.inFlight}`);
  }
  return perNode;
}

/** Runs `ops` on both sides; throws at the first step whose answer or visible state differs. */
async function replay(ops: readonly Op[]): Promise<void> {
  let sides = await freshSides();
  await registerAll(sides.memory, await sides.nodes[0]!.sharedTime());
  await registerAll(sides.nodes[0]!);
  const w = newWorld();
  ran.sequences++;
  try {
    for (const [k, given] of ops.entries()) {
      ran.steps++;
      if (given.op === 'flush') {
        await Promise.all(sides.nodes.map((n) => n.close()));
        sides = await freshSides();
      }
      const at = await sides.nodes[0]!.sharedTime();
      w.times.push(at);
      const { memory, nodes } = sides;
      const op = await resolve(given, memory);
      const room = await roomCase(memory, op, at);
      const m = plain(await runStep({ node: () => memory }, op, w, at));
      if (room) {
        const key = `${room} ${typeof m === 'number' ? 'granted' : 'refused'}`;
        ran.rooms[key] = (ran.rooms[key] ?? 0) + 1;
      }
      const r = plain(await runStep({ node: (i) => nodes[i]!, redis: true }, op, w, at));
      const where = () => `step ${k} ${JSON.stringify(op)}`;
      if (!isDeepStrictEqual(asFence(m), asFence(r)))
        throw new Error(`${where()}: memory answered ${JSON.stringify(m)}, redis ${JSON.stringify(r)}`);
      newFences(op, w, m, r, where);
      noteStep(op, w, m, r);
      tally(op, m);
      const seenBy = 'node' in op ? op.node : 0;
      const ms = await observe(memory, k, nodeId(seenBy));
      const rs = await observe(nodes[seenBy]!, k);
      if (!isDeepStrictEqual(ms, rs))
        throw new Error(
          `${where()}: state differs\nmemory ${JSON.stringify(ms)}\nredis  ${JSON.stringify(rs)}`,
        );
      const mo = await ownCounts((i) => memory.views(URLS, undefined, false, nodeId(i)));
      const ro = await ownCounts((i) => nodes[i]!.views(URLS));
      if (!isDeepStrictEqual(mo, ro))
        throw new Error(
          `${where()}: per-node counts differ\nmemory ${JSON.stringify(mo)}\nredis  ${JSON.stringify(ro)}`,
        );
      // Redis's clock moves on before the next step reads it: no change shares a ms with a poll's start.
      await sleep(2);
    }
  } finally {
    await Promise.all(sides.nodes.map((n) => n.close()));
  }
}

describe('memory store ≡ Redis scripts (differential, real redis-server)', () => {
  it(
    `answers alike over ${RUNS} generated sequences of up to ${MAX_STEPS} steps from ${NODES} nodes`,
    async () => {
      const started = Date.now();
      await fc.assert(
        fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: MAX_STEPS, size: 'max' }), (ops) =>
          replay(ops),
        ),
        { seed: SEED, numRuns: RUNS, path: process.env.STORE_DIFF_PATH },
      );
      // For the record (the report quotes it): how much ran, and how long it took.
      process.stdout.write(
        `store differential: ${ran.sequences} sequences, ${ran.steps} steps in ${Date.now() - started} ms (seed ${SEED}); granted or done: ${JSON.stringify(ran.granted)}; unloads for an adapter: ${JSON.stringify(ran.rooms)}\n`,
      );
      // Every sequence ran (a replay of one path runs that one and what it shrank from).
      expect(ran.sequences).toBeGreaterThanOrEqual(process.env.STORE_DIFF_PATH ? 1 : RUNS);
    },
    Number(process.env.STORE_DIFF_TIMEOUT_MS ?? 120_000),
  );
});

describe('the request path in one round trip (views and lease)', () => {
  it('reads the views before the lease, on a resident adapter and with no replica registered', () =>
    replay([
      { op: 'snapshot', node: 0, url: 0, ok: true, back: 0, registry: [0], active: [], waiting: 0 },
      { op: 'viewsAndLease', node: 1, lease: 0, url: 0, adapter: 0 },
      { op: 'viewsAndLease', node: 0, lease: 1, url: 0, adapter: 0 },
      { op: 'release', node: 1, lease: 0, status: 200 },
      { op: 'flush' },
      { op: 'viewsAndLease', node: 0, lease: 2, url: 1, adapter: null },
      { op: 'upsert', node: 0, url: 1, priority: 0 },
      { op: 'release', node: 0, lease: 2, status: null },
    ]));
});

describe("a node's recovery: its leases taken again in one batch (retake)", () => {
  it('leases taken again in one batch count as acquired one by one: uncounted ones counted, open ones once', () =>
    replay([
      { op: 'flush' }, // no replica registered
      { op: 'acquire', node: 0, lease: 0, url: 0, adapter: 0 },
      { op: 'upsert', node: 0, url: 0, priority: 0 },
      { op: 'acquire', node: 0, lease: 1, url: 0, adapter: 1 },
      {
        op: 'retake',
        node: 0,
        leases: [
          { lease: 0, url: 0, adapter: 0 }, // open, counted nowhere: counted now
          { lease: 1, url: 0, adapter: 1 }, // open and counted: once
          { lease: 2, url: 1, adapter: null }, // lost with the state, its replica unknown
          { lease: 3, url: 0, adapter: 0 },
        ],
      },
      { op: 'upsert', node: 0, url: 1, priority: 0 },
      { op: 'expire', node: 1, maxAge: 0 },
      { op: 'retake', node: 0, leases: [{ lease: 0, url: 0, adapter: 0 }] },
      { op: 'release', node: 0, lease: 0, status: null },
    ]));
});

describe('breaks found by review, fixed in both stores: they must stay alike', () => {
  it('a lease taken before its replica was registered counts once taken again: no unload under it', () =>
    replay([
      { op: 'flush' }, // no replica registered
      { op: 'acquire', node: 0, lease: 0, url: 0, adapter: 0 },
      { op: 'upsert', node: 0, url: 0, priority: 0 },
      { op: 'beginLoad', node: 1, url: 0, adapter: 0, limit: 4 },
      { op: 'finishLoad', node: 1, url: 0, adapter: 0, fence: 0, own: true, ok: true },
      { op: 'acquire', node: 0, lease: 0, url: 0, adapter: 0 }, // its node's recovery takes it again
      { op: 'beginUnload', node: 1, url: 0, adapter: 0, for: null, limit: null, pick: false },
      { op: 'release', node: 0, lease: 0, status: 200 },
      { op: 'beginUnload', node: 1, url: 0, adapter: 0, for: null, limit: null, pick: false },
    ]));

  it('an unload whose end a poll saw first still makes its room: a second unload for it is refused', () =>
    replay([
      { op: 'beginLoad', node: 0, url: 0, adapter: 0, limit: 2 },
      { op: 'finishLoad', node: 0, url: 0, adapter: 0, fence: 0, own: true, ok: true },
      { op: 'beginLoad', node: 0, url: 0, adapter: 1, limit: 2 },
      { op: 'finishLoad', node: 0, url: 0, adapter: 1, fence: 1, own: true, ok: true },
      { op: 'beginUnload', node: 0, url: 0, adapter: 0, for: 2, limit: 2, pick: false },
      // A poll begun after the unload's start reads the registry without `a`, applied before its end.
      { op: 'snapshot', node: 1, url: 0, ok: true, back: 0, registry: [1], active: [], waiting: 0 },
      { op: 'finishUnload', node: 0, url: 0, adapter: 0, fence: 2, own: true, ok: true },
      { op: 'beginUnload', node: 1, url: 0, adapter: 1, for: 2, limit: 2, pick: false },
    ]));
});

describe('rooms made for an adapter, judged by the caller’s limit', () => {
  // Generated sequences seldom make a room and come back for it (the counts above): this one does,
  // on a replica over its limit (3 loaded, limit 2), full by another load, and free again once that
  // load failed.
  it('refuses a second unload for d while its room is free, lets it go while the replica is full', async () => {
    const load = (adapter: number, fence: number, ok = true): Op[] => [
      { op: 'beginLoad', node: 0, url: 0, adapter, limit: 4 },
      { op: 'finishLoad', node: 0, url: 0, adapter, fence, own: true, ok },
    ];
    const unloadFor = (node: number, adapter: number, limit: number | null): Op => ({
      op: 'beginUnload',
      node,
      url: 0,
      adapter,
      for: 3,
      limit,
      pick: false,
    });
    const finishUnload = (fence: number, ok: boolean): Op => ({
      op: 'finishUnload',
      node: 0,
      url: 0,
      adapter: 0,
      fence,
      own: true,
      ok,
    });
    const before = { ...ran.rooms };
    await replay([
      ...load(0, 0),
      ...load(1, 1),
      ...load(2, 2),
      unloadFor(0, 0, 2), // 3 of 2: granted
      finishUnload(0, true),
      unloadFor(1, 1, 2), // made, 2 of 2: granted
      finishUnload(1, true),
      unloadFor(1, 2, 2), // made, 1 of 2: refused
      unloadFor(2, 2, null), // no limit: refused to the room's TTL
      { op: 'beginLoad', node: 2, url: 0, adapter: 1, limit: 2 }, // another adapter fills it
      { op: 'beginLoad', node: 1, url: 0, adapter: 3, limit: 2 }, // d's own load, refused: its room kept
      unloadFor(1, 2, 2), // made, 2 of 2: granted
      finishUnload(2, false),
      { op: 'finishLoad', node: 2, url: 0, adapter: 1, fence: 3, own: true, ok: false }, // and fails
      unloadFor(0, 2, 2), // made, 1 of 2 again: refused
      unloadFor(0, 2, 3), // made, 1 of 3: refused
      { op: 'beginLoad', node: 1, url: 0, adapter: 3, limit: 2 }, // d's load: its room is gone
    ]);
    const got = (k: string) => (ran.rooms[k] ?? 0) - (before[k] ?? 0);
    expect([got('made free refused'), got('made full granted'), got('none full granted')]).toEqual([3, 2, 1]);
  });

  it('counts no slot a trim is unloading: a second unload for d waits for it, goes once it failed', () =>
    // Generated sequences seldom reach this either (a room made, then a trim beside it).
    replay([
      ...[0, 1, 2].flatMap((adapter, fence): Op[] => [
        { op: 'beginLoad', node: 0, url: 0, adapter, limit: 4 },
        { op: 'finishLoad', node: 0, url: 0, adapter, fence, own: true, ok: true },
      ]),
      { op: 'beginUnload', node: 1, url: 0, adapter: 2, for: 4, limit: 2, pick: false }, // a trim of c, 3 of 2
      { op: 'beginUnload', node: 0, url: 0, adapter: 1, for: 3, limit: 2, pick: false }, // b for d
      { op: 'finishUnload', node: 0, url: 0, adapter: 1, fence: 1, own: true, ok: true },
      { op: 'beginUnload', node: 2, url: 0, adapter: 0, for: 3, limit: 2, pick: false }, // refused
      { op: 'finishUnload', node: 1, url: 0, adapter: 2, fence: 0, own: true, ok: false },
      { op: 'beginUnload', node: 2, url: 0, adapter: 0, for: 3, limit: 2, pick: false }, // granted
    ]));

  it('a trim takes the replica down to its limit, not below: refused once the excess is gone', async () => {
    // Generated sequences seldom trim a replica over its limit twice. Two nodes' trims (or one on a
    // stale reading): a, b, c at a limit of 2 lose one, not two; over by two, two go, not three.
    const before = { ...ran.rooms };
    await replay([
      ...[0, 1, 2].flatMap((adapter, fence): Op[] => [
        { op: 'beginLoad', node: 0, url: 0, adapter, limit: 4 },
        { op: 'finishLoad', node: 0, url: 0, adapter, fence, own: true, ok: true },
      ]),
      { op: 'beginUnload', node: 0, url: 0, adapter: 0, for: 4, limit: 2, pick: false }, // 3 of 2: granted
      { op: 'beginUnload', node: 1, url: 0, adapter: 1, for: 4, limit: 2, pick: false }, // refused
      { op: 'finishUnload', node: 0, url: 0, adapter: 0, fence: 0, own: true, ok: true },
      { op: 'beginUnload', node: 1, url: 0, adapter: 1, for: 4, limit: 2, pick: false }, // 2 of 2: refused
      { op: 'beginUnload', node: 1, url: 0, adapter: 1, for: 4, limit: 1, pick: false }, // 2 of 1: granted
      { op: 'finishUnload', node: 1, url: 0, adapter: 1, fence: 1, own: true, ok: false },
      ...[0, 3].flatMap((adapter, fence): Op[] => [
        { op: 'beginLoad', node: 2, url: 0, adapter, limit: 4 },
        { op: 'finishLoad', node: 2, url: 0, adapter, fence: fence + 3, own: true, ok: true },
      ]),
      { op: 'beginUnload', node: 2, url: 0, adapter: 1, for: 4, limit: 2, pick: false }, // 4 of 2: granted
      { op: 'finishUnload', node: 2, url: 0, adapter: 1, fence: 2, own: true, ok: true },
      { op: 'beginUnload', node: 0, url: 0, adapter: 2, for: 4, limit: 2, pick: false }, // 3 of 2: granted
      { op: 'finishUnload', node: 0, url: 0, adapter: 2, fence: 3, own: true, ok: true },
      { op: 'beginUnload', node: 1, url: 0, adapter: 0, for: 4, limit: 2, pick: false }, // 2 of 2: refused
      { op: 'beginUnload', node: 1, url: 0, adapter: 0, for: 4, limit: null, pick: false }, // no limit: granted
    ]);
    // The memory side's answers (Redis's are compared with them): a trim has no room, 'none'.
    const got = (k: string) => (ran.rooms[k] ?? 0) - (before[k] ?? 0);
    expect([got('none full granted'), got('none full refused')]).toEqual([4, 3]);
  });
});

describe('budget refunds (a prefetch unit no load followed)', () => {
  it('go back to the window they were granted in only, never below zero, and a refused spend counts nothing', async () => {
    const before = { ...ran.granted };
    await replay([
      { op: 'budget', node: 0, key: 0, limit: 2 }, // granted: window 0
      { op: 'budget', node: 1, key: 0, limit: 2 }, // granted
      { op: 'budget', node: 2, key: 0, limit: 2 }, // refused, not counted
      { op: 'refund', node: 1, window: 0, count: 1 }, // one back
      { op: 'budget', node: 2, key: 0, limit: 2 }, // granted again
      { op: 'budget', node: 0, key: 1, limit: 1 }, // the other key: its own window
      { op: 'refund', node: 0, window: 12, count: 1 }, // a window never opened: nothing
      { op: 'refund', node: 2, window: 1, count: 2 }, // window 0 again (named by its second grant): two back
      { op: 'refund', node: 2, window: 0, count: 2 }, // none left: never below zero
      { op: 'flush' },
      { op: 'budget', node: 0, key: 0, limit: 2 }, // a new window
      { op: 'refund', node: 0, window: 0, count: 1 }, // the old window's: nothing
      { op: 'budget', node: 0, key: 0, limit: 2 },
      { op: 'budget', node: 0, key: 0, limit: 2 }, // refused: the new window is whole
    ]);
    const got = (k: string) => (ran.granted[k] ?? 0) - (before[k] ?? 0);
    // The memory side's answers (Redis's are compared with them).
    expect([got('budget'), got('refund')]).toEqual([6, 2]);
  });
});

describe('replicas no node routes to are forgotten (retainReplicas)', () => {
  it('alike: kept while another node claims it or anything runs on it, then forgotten with every record', async () => {
    const before = ran.granted.retain ?? 0;
    await replay([
      // Node 0 registered all three; node 1 claims b's replica too, node 2 takes a lease on c's.
      { op: 'retain', node: 1, urls: [1], grace: 0 },
      { op: 'acquire', node: 2, lease: 0, url: 2, adapter: null },
      { op: 'beginLoad', node: 0, url: 0, adapter: 0, limit: 4 },
      { op: 'snapshot', node: 0, url: 0, ok: true, back: 0, registry: [1], active: [], waiting: 0 },
      { op: 'retain', node: 0, urls: [], grace: 0 }, // node 0 drops all three: none due yet
      { op: 'retain', node: 0, urls: [], grace: 1 }, // within the grace
      { op: 'retain', node: 0, urls: [], grace: 0 }, // a's load keeps 0, node 1 keeps 1, the lease 2
      { op: 'finishLoad', node: 0, url: 0, adapter: 0, fence: 0, own: true, ok: true },
      { op: 'retain', node: 1, urls: [1], grace: 0 }, // forgets 0
      { op: 'release', node: 2, lease: 0, status: null },
      { op: 'retain', node: 2, urls: [], grace: 0 }, // forgets 2
      { op: 'retain', node: 1, urls: [], grace: 0 },
      { op: 'retain', node: 1, urls: [], grace: 0 }, // forgets 1
      { op: 'snapshot', node: 0, url: 1, ok: true, back: 0, registry: [0], active: [], waiting: 0 }, // unknown now
      { op: 'upsert', node: 2, url: 0, priority: 1 }, // registered afresh, claimed by node 2
      { op: 'retain', node: 0, urls: [], grace: 0 },
    ]);
    // The memory side's answers (Redis's are compared with them): three replicas forgotten, in three calls.
    expect((ran.granted.retain ?? 0) - before).toBe(3);
  });
});

/** Sequences the property found (shrunk), each a difference fixed since: they must stay alike. */
describe('differences found, fixed', () => {
  it('an expired lease is reported alike (the event says the age it was held over, as Redis says it)', () =>
    replay([
      { op: 'acquire', node: 0, lease: 0, url: 0, adapter: null },
      { op: 'expire', node: 0, maxAge: 0 },
    ]));

  it("finishing a change on another adapter with a live fence ends nobody else's lock", () =>
    replay([
      { op: 'upsert', node: 0, url: 1, priority: 0 },
      { op: 'beginLoad', node: 0, url: 1, adapter: 0, limit: 1 },
      { op: 'finishUnload', node: 0, url: 0, adapter: 0, fence: 0, own: false, ok: false },
      { op: 'holds', node: 0, url: 1, adapter: 0, fence: 0, own: true },
    ]));

  it("finishing an unload with a load's fence (or the reverse) leaves that change's lock alone", () =>
    replay([
      { op: 'beginLoad', node: 0, url: 0, adapter: 0, limit: 1 },
      // The load's fence, named for its own replica and adapter, given to finish an unload.
      { op: 'finishUnload', node: 0, url: 0, adapter: 0, own: false, fence: 0, ok: false },
      { op: 'holds', node: 0, url: 0, adapter: 0, fence: 0, own: true },
    ]));

  it('leases one poll renewed together and one expiry reclaimed are reported in either order', () =>
    replay([
      { op: 'acquire', node: 0, lease: 1, url: 2, adapter: 0 },
      { op: 'upsert', node: 0, url: 2, priority: 0 },
      { op: 'acquire', node: 0, lease: 0, url: 2, adapter: 0 },
      { op: 'snapshot', node: 0, url: 2, ok: true, back: 0, registry: [], active: [0], waiting: 0 },
      { op: 'expire', node: 0, maxAge: 0 },
    ]));

  it('a base-model lease released leaves no adapter idle (no adapter was its)', () =>
    replay([
      { op: 'acquire', node: 0, lease: 0, url: 0, adapter: null },
      { op: 'release', node: 0, lease: 0, status: null },
    ]));

  it('a lease taken before its replica was registered is not uncounted from it when released', () =>
    replay([
      { op: 'flush' }, // no replica registered
      { op: 'acquire', node: 0, lease: 0, url: 0, adapter: null },
      { op: 'upsert', node: 0, url: 0, priority: 0 },
      { op: 'release', node: 0, lease: 0, status: null },
    ]));
});
