/**
 * The shared state under faults (issue 24, items 1, 2, 3, 7 and 8), over a real redis-server
 * and a TCP hop per node that a test cuts, blackholes and restores (harness/net/tcp-proxy.ts).
 * Each test fails on the bookkeeping before issue 24.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { systemClock, type Clock } from '../../src/clock';
import { LEASE_CEILING } from '../../src/fleet/memory-leases';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import type { Lease, ReplicaSnapshot } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';
import { RedisServer } from '../../harness/redis/server';
import { TcpProxy } from '../../harness/net/tcp-proxy';
import { answered, waitFor } from '../../harness/wait';

const U = 'http://10.0.0.1:8000';
const SPEC = { url: U, backend: 'vllm' as const, priority: 0 };
const TTL = 60_000;

let redis: RedisServer;
let admin: Redis;
const proxies: TcpProxy[] = [];
const stores: FailoverFleetStore[] = [];

beforeAll(async () => {
  redis = await RedisServer.start();
  admin = new Redis({ host: '127.0.0.1', port: redis.port, lazyConnect: true });
  await admin.connect();
});
afterEach(async () => {
  for (const p of proxies) p.restore();
  await Promise.all(stores.splice(0).map((s) => s.close()));
  await Promise.all(proxies.splice(0).map((p) => p.close()));
});
afterAll(async () => {
  admin.disconnect();
  await redis.close();
});

const prefix = () => `sf${randomBytes(4).toString('hex')}:`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A poll of U: adapter `a` in its registry; `active`: adapters with requests running or waiting. */
const poll = (active: string[] = []): ReplicaSnapshot => ({
  at: Date.now(),
  ok: true,
  load: { running: active.length, waiting: 0, kvUsage: 0.1, activeAdapters: active, malformedLines: 0 },
  registry: [{ name: 'a', path: '/adapters/a' }],
  managed: () => true,
});

interface Node {
  s: FailoverFleetStore;
  shared: RedisFleetStore;
  proxy?: TcpProxy;
}

/** A Kong node's store on prefix `p`; with `viaProxy`, its link to Redis goes through a TcpProxy. */
async function node(
  p: string,
  id: string,
  o: { viaProxy?: boolean; nodeTtlMs?: number; timeoutMs?: number; clock?: Clock } = {},
): Promise<Node> {
  const proxy = o.viaProxy ? await TcpProxy.start(redis.port) : undefined;
  if (proxy) proxies.push(proxy);
  const config = redis.config(p, {
    node_ttl_ms: o.nodeTtlMs ?? 10_000,
    port: proxy?.port ?? redis.port,
    ...(o.timeoutMs !== undefined && { timeout: o.timeoutMs }),
  });
  const shared = new RedisFleetStore(config, id);
  const s = new FailoverFleetStore(shared, silentLogger, { probeMs: 50, logEveryMs: 60_000 }, o.clock);
  stores.push(s);
  await s.upsertReplica(SPEC);
  return { s, shared, proxy };
}

/**
 * A node whose process starts while its link to Redis (`proxy`) is cut: registering its replica
 * (what a router configuration does first) fails, so it decides alone from its first request.
 */
async function nodeCutOff(p: string, id: string, proxy: TcpProxy): Promise<Node> {
  const config = redis.config(p, { node_ttl_ms: 10_000, port: proxy.port, timeout: 300 });
  const shared = new RedisFleetStore(config, id);
  const s = new FailoverFleetStore(shared, silentLogger, { probeMs: 50, logEveryMs: 60_000 });
  stores.push(s);
  await s.upsertReplica(SPEC);
  return { s, shared, proxy };
}

/**
 * The state on prefix `p` began more than node_ttl_ms ago: every live node's heartbeat has come
 * since, so the node count a reply carries is whole (a young state's may miss some).
 */
const beganLongAgo = async (p: string) => void (await admin.set(`${p}epoch-at`, 0));

const lease = (id: string, at = Date.now()): Lease => ({ id, url: U, adapter: 'a', at });

describe('item 1: recovery races admission', () => {
  it('a request admitted while recovery walks the lease list is counted in Redis too', async () => {
    const a = await node(prefix(), 'n1', { viaProxy: true });
    await a.s.applySnapshot(U, poll());
    expect(await a.s.acquire(lease('S1'))).toBe('loaded');
    a.proxy!.cut('refuse');
    await a.s.acquire(lease('L1')); // Redis unreachable: a local lease
    expect(a.s.mode()).toBe('local');
    // A request is admitted (still locally: the node is degraded) while recovery re-takes leases.
    let admitted: Promise<unknown> | null = null;
    const retake = a.shared.retake.bind(a.shared);
    a.shared.retake = (l) => {
      admitted ??= a.s.acquire(lease('L2'));
      return retake(l);
    };
    a.proxy!.restore();
    await waitFor(() => a.s.mode() === 'redis', 10_000, 'recovery');
    await admitted;
    // S1, L1 and L2 are all open: another node must see 3 in flight on `a`.
    expect(await a.shared.inFlightTotal()).toBe(3);
    expect((await a.shared.views([U], { name: 'a' }))[0]!.adapter?.inFlight).toBe(3);
    for (const id of ['S1', 'L1', 'L2']) await a.s.release(id, Date.now(), 200);
    expect(await a.shared.inFlightTotal()).toBe(0);
  });
});

describe('item 2: every node notices an emptied Redis', () => {
  it('a node whose replicas another node re-registered re-takes its leases on its next decision', async () => {
    const p = prefix();
    const a = await node(p, 'nA');
    const b = await node(p, 'nB');
    await a.s.applySnapshot(U, poll());
    expect(await a.s.acquire(lease('A1'))).toBe('loaded');
    await admin.flushall();
    // B notices first: it registers the replica again and its poll adopts `a` again.
    await b.s.views([U], { name: 'a' });
    await b.s.applySnapshot(U, poll());
    // A's next decision (the one round trip it makes anyway) must tell it Redis was emptied.
    await a.s.views([U], { name: 'other' });
    expect(await b.s.beginUnload(U, 'a', Date.now(), TTL)).toBeNull();
    expect((await b.s.views([U], { name: 'a' }))[0]!.adapter?.inFlight).toBe(1);
  });

  it('an idle node (no decision to make) re-takes its leases from its heartbeat', async () => {
    const p = prefix();
    const a = await node(p, 'nA', { nodeTtlMs: 400 });
    const b = await node(p, 'nB', { nodeTtlMs: 400 });
    await a.s.applySnapshot(U, poll());
    expect(await a.s.acquire(lease('A1'))).toBe('loaded');
    await admin.flushall();
    await b.s.views([U], { name: 'a' });
    await b.s.applySnapshot(U, poll());
    await waitFor(async () => (await b.shared.inFlightTotal()) === 1, 3000, "A's lease counted again");
    expect(await b.s.beginUnload(U, 'a', Date.now(), TTL)).toBeNull();
  });

  it('an idle node whose own registration is the first after a FLUSHALL takes its leases again: no peer unloads under them', async () => {
    // Its registration begins the new state and notes its epoch, so its heartbeat never finds the
    // state changed (failed first: "A's lease counted again not met within 3000 ms").
    const p = prefix();
    const a = await node(p, 'nA', { nodeTtlMs: 400 });
    const b = await node(p, 'nB', { nodeTtlMs: 400 });
    await a.s.applySnapshot(U, poll());
    // A's request is on its way to the replica; A has no other decision to make.
    expect(await a.s.acquire(lease('A1'))).toBe('loaded');
    await admin.flushall();
    // A router configuration registered on A now (a Kong configuration push): its replica's
    // registration is the first after the FLUSHALL and begins the new state.
    await a.s.upsertReplica(SPEC);
    // B's heartbeat finds the new epoch and B takes its (no) leases back; its poll adopts `a`.
    await b.s.views([U], { name: 'a' });
    await b.s.applySnapshot(U, poll());
    await waitFor(async () => (await b.shared.inFlightTotal()) === 1, 3000, "A's lease counted again");
    // Past the grace (node_ttl_ms) a peer's unload of `a` is refused: A's request still runs.
    await sleep(500);
    expect(await b.s.beginUnload(U, 'a', Date.now(), TTL)).toBeNull();
  });
});

describe('item 3: a partitioned node keeps its leases', () => {
  it('a node cut off from Redis for longer than node_ttl_ms keeps its leases: the others unload nothing under them', async () => {
    const p = prefix();
    const a = await node(p, 'nA', { viaProxy: true, nodeTtlMs: 300 });
    const b = await node(p, 'nB', { nodeTtlMs: 300 });
    await a.s.applySnapshot(U, poll());
    expect(await a.s.acquire(lease('A1'))).toBe('loaded');
    a.proxy!.cut('blackhole'); // a partition: A's heartbeats hang, A's requests keep running
    const end = Date.now() + 1000;
    while (Date.now() < end) {
      await sleep(100);
      await b.s.expireLeases(Date.now(), 600_000);
    }
    // Read in Redis itself: a reply to B past its timeout on a stalled machine leaves B deciding
    // from its own state, which never saw `a` (the views then had no adapter: `undefined`).
    expect((await answered(() => b.shared.views([U], { name: 'a' })))[0]!.adapter?.inFlight).toBe(1);
    expect(await answered(() => b.shared.beginUnload(U, 'a', Date.now(), TTL))).toBeNull();
  });

  it('the leases of a silent node still go once not renewed for lease_max_age_ms', async () => {
    const p = prefix();
    const a = await node(p, 'nA', { nodeTtlMs: 300 });
    const b = await node(p, 'nB', { nodeTtlMs: 300 });
    await a.s.applySnapshot(U, poll());
    await a.s.acquire(lease('A1'));
    await a.s.close(); // A stops for good
    await waitFor(
      async () => (await b.s.expireLeases(Date.now(), 500)).some((l) => l.id === 'A1'),
      5000,
      "A's lease reclaimed by age",
    );
    expect(await b.s.beginUnload(U, 'a', Date.now(), TTL)).not.toBeNull();
  });
});

describe("a lease reclaimed by another node's expiry sweep", () => {
  it('is not taken again when its node recovers from an outage', async () => {
    const p = prefix();
    const a = await node(p, 'nA', { viaProxy: true });
    const b = await node(p, 'nB');
    await a.s.applySnapshot(U, poll());
    await a.s.acquire(lease('A1'));
    // Its log phase never comes; node B's sweep reclaims it once older than 100 ms.
    await sleep(150);
    expect((await b.s.expireLeases(Date.now(), 100)).map((l) => l.id)).toEqual(['A1']);
    // Node A's link fails, then comes back: its recovery re-takes the leases it holds.
    a.proxy!.cut('refuse');
    await a.s.acquire(lease('A2'));
    expect(a.s.mode()).toBe('local');
    a.proxy!.restore();
    await waitFor(() => a.s.mode() === 'redis', 10_000, 'recovery');
    // A2 (admitted during the outage) is counted in Redis; A1 stays reclaimed.
    expect((await admin.hkeys(`${p}lease`)).sort()).toEqual(['A2']);
  });

  it('is not taken again once Redis forgot the reclaim (4 max ages later): its node forgets it at the ceiling', async () => {
    // Node B's sweep reclaimed A1 and A never heard of it (each node's poller sweeps; the sweep that
    // reclaims tells only its caller). Redis remembers the reclaim 4 max ages; A kept A1 a day, so
    // every recovery after that took the orphan again and counted it anew (up to 4 max ages more,
    // renewed on a hot adapter): the inflated count came back with each outage, and held the adapter.
    const p = prefix();
    const a = await node(p, 'nA', { viaProxy: true });
    const b = await node(p, 'nB');
    await a.s.applySnapshot(U, poll());
    await a.s.acquire(lease('A1'));
    await sleep(150);
    expect((await b.s.expireLeases(Date.now(), 100)).map((l) => l.id)).toEqual(['A1']);
    // Past 4 max ages since A1 was taken and since it was reclaimed: B's next sweep forgets the reclaim.
    await sleep(LEASE_CEILING * 100 + 50);
    await b.s.expireLeases(Date.now(), 100);
    expect(await admin.zscore(`${p}reclaimed`, 'A1')).toBeNull();
    await a.s.expireLeases(Date.now(), 100); // A's own poller sweeps too: nothing of A's is open
    a.proxy!.cut('refuse');
    await a.s.acquire(lease('A2'));
    expect(a.s.mode()).toBe('local');
    a.proxy!.restore();
    await waitFor(() => a.s.mode() === 'redis', 10_000, 'recovery');
    expect((await admin.hkeys(`${p}lease`)).sort()).toEqual(['A2']);
    expect((await b.s.views([U], { name: 'a' }))[0]).toMatchObject({ inFlight: 1, adapter: { inFlight: 1 } });
  });
});

describe('a second emptying while a node takes its leases back after the first', () => {
  it('is taken back too: the heartbeat that tells it during the retake is not lost in the retake under way', async () => {
    // Two emptyings close together (a FLUSHALL, then a restart without persistence, say): the
    // node's retake after the first lands on the second's empty state (its replica unknown: the
    // lease counts nowhere), and a peer registers the replica again. The node's heartbeat tells it
    // while its reclaim is still under way; that reclaim registered before the second emptying.
    const p = prefix();
    const a = await node(p, 'nA', { nodeTtlMs: 400 }); // heartbeats every 100 ms
    const b = await node(p, 'nB', { nodeTtlMs: 400 });
    await a.s.applySnapshot(U, poll());
    expect(await a.s.acquire(lease('A1'))).toBe('loaded');
    const epochs: (string | null)[] = [];
    const retake = a.shared.retake.bind(a.shared);
    a.shared.retake = async (ls) => {
      if (epochs.length > 0) return retake(ls);
      epochs.push(a.shared.currentEpoch);
      await admin.flushall(); // the second emptying, after this reclaim registered U
      const refused = await retake(ls);
      await b.shared.upsertReplica(SPEC); // a peer begins the state anew
      const third = await admin.get(`${p}epoch`);
      await waitFor(() => a.shared.currentEpoch === third, 5000, "A's heartbeat reads the peer's epoch");
      epochs.push(third);
      return refused;
    };
    await admin.flushall(); // the first
    await waitFor(() => epochs.length === 2, 5000, 'the reclaim after the first emptying');
    // A decides nothing (an idle node, its request still running): its heartbeats alone must do it.
    await waitFor(
      async () => (await b.s.views([U], { name: 'a' }))[0]?.inFlight === 1,
      3000,
      "A's lease counted again after the second emptying",
    ).catch(() => undefined);
    expect((await b.s.views([U], { name: 'a' }))[0]).toMatchObject({ inFlight: 1 });
  });
});

/** A poll of U that failed (the replica answered 500 or refused). */
const pollDown = (): ReplicaSnapshot => ({ at: Date.now(), ok: false, error: 'GET /metrics: 500' });

describe('a replica polled down while its node decided alone (dst seeds 1025140, 1039269)', () => {
  /**
   * Node A polls U up, then, cut off from Redis, down: heard by its local store only. B stays on
   * Redis. The up poll carries Redis's time read before it, as the poller's do: without it, Redis
   * dates a poll by when it runs it, and on a stalled machine it ran A's (timed out) after A's
   * down poll, which the recovery's push then lost to. The down poll begins past the 50 ms margin
   * Redis takes off the start it estimates for that push.
   */
  async function polledDownAlone(timeoutMs?: number) {
    const p = prefix();
    const a = await node(p, 'nA', { viaProxy: true, timeoutMs });
    const b = await node(p, 'nB');
    await a.s.applySnapshot(U, { ...poll(), sharedStartedAt: await a.s.sharedTime() });
    await sleep(100);
    a.proxy!.cut('refuse');
    await a.s.applySnapshot(U, pollDown());
    expect(a.s.mode()).toBe('local');
    return { a, b };
  }
  const recovered = (a: Node) => waitFor(() => a.s.mode() === 'redis', 10_000, 'recovery');

  it('reads down in Redis once the node is back, when no node polled it since', async () => {
    const { a, b } = await polledDownAlone();
    a.proxy!.restore();
    await recovered(a);
    expect((await a.s.views([U]))[0]!.health).toBe('down');
    expect((await b.s.views([U]))[0]!.health).toBe('down');
  });

  it('leaves a newer poll by another node as it is', async () => {
    const { a, b } = await polledDownAlone();
    await sleep(100);
    await b.s.applySnapshot(U, poll()); // the replica is back, and B saw it
    a.proxy!.restore();
    await recovered(a);
    expect((await b.s.views([U]))[0]!.health).toBe('up');
  });

  /**
   * The push reaches Redis late (a slow link): dated by when Redis ran it, A's down poll looked
   * newer than B's up poll that began after it, and Redis said a healthy replica down until the
   * next poll. Each way of every call of A waits 200 ms, within its 3 s timeout.
   */
  it('leaves a newer poll by another node as it is, however late the push reaches Redis', async () => {
    const { a, b } = await polledDownAlone(3000);
    await sleep(50);
    // The replica is back and B saw it, its poll dated by Redis's time as the poller's are.
    await b.s.applySnapshot(U, { ...poll(), sharedStartedAt: await b.s.sharedTime() });
    a.proxy!.restore();
    a.proxy!.delay(200);
    await recovered(a);
    expect((await b.s.views([U]))[0]!.health).toBe('up');
  });

  /**
   * A's wall clock is stepped back 2 s during the outage (a skew correction), after its down poll:
   * measured on it, the time since that poll began came out 2 s short, the push was dated 2 s late,
   * after B's up poll, and overwrote it: a healthy replica read down until the next poll. The poller
   * notes each poll's start on the monotonic clock too (`monoStartedAt`), which does not step.
   */
  it('leaves a newer poll by another node as it is, the node’s wall clock stepped back during the outage', async () => {
    const p = prefix();
    const local = {
      skew: 0,
      now: () => Date.now() + local.skew,
      monotonic: () => Date.now(),
      after: (ms: number, fn: () => void) => systemClock.after(ms, fn),
    };
    const a = await node(p, 'nA', { viaProxy: true, clock: local });
    const b = await node(p, 'nB');
    await a.s.applySnapshot(U, { ...poll(), sharedStartedAt: await a.s.sharedTime() });
    await sleep(100);
    a.proxy!.cut('refuse');
    const began = { wall: local.now(), mono: local.monotonic() };
    await a.s.applySnapshot(U, {
      ...pollDown(),
      at: local.now(),
      startedAt: began.wall,
      monoStartedAt: began.mono,
      monoAt: local.monotonic(),
    });
    expect(a.s.mode()).toBe('local');
    local.skew = -2_000;
    await sleep(200);
    // The replica is back and B saw it, its poll dated by Redis's time as the poller's are.
    await b.s.applySnapshot(U, { ...poll(), sharedStartedAt: await b.s.sharedTime() });
    a.proxy!.restore();
    await recovered(a);
    expect((await b.s.views([U]))[0]!.health).toBe('up');
  });

  /**
   * The other side of dating the push early: over the same slow link (a 400 ms round trip,
   * longer than the 100 ms between A's up poll and its down poll), the push must still not lose
   * to A's own older up poll.
   */
  it('reads down once the node is back over a slow link, when no node polled it since', async () => {
    const { a, b } = await polledDownAlone(3000);
    a.proxy!.restore();
    a.proxy!.delay(200);
    await recovered(a);
    expect((await b.s.views([U]))[0]!.health).toBe('down');
  });
});

/**
 * The other way round (dst seed 503368): Redis last heard U down, before a partition; node A, cut
 * off, polls it up again (local store only). Back on Redis, A read U down as Redis last heard,
 * older than its own up poll, until its next poll landed; with the other replica really down,
 * both read down and the health filter failed open onto the down one.
 */
describe('a replica polled up while its node decided alone (dst seed 503368)', () => {
  it('reads up in Redis once the node is back, when no node polled it since', async () => {
    const p = prefix();
    const a = await node(p, 'nA', { viaProxy: true });
    const b = await node(p, 'nB');
    await a.s.applySnapshot(U, { ...pollDown(), sharedStartedAt: await a.s.sharedTime() });
    await sleep(100);
    a.proxy!.cut('refuse');
    await a.s.applySnapshot(U, poll()); // the replica is back: heard by A's local store only
    expect(a.s.mode()).toBe('local');
    a.proxy!.restore();
    await waitFor(() => a.s.mode() === 'redis', 10_000, 'recovery');
    expect((await a.s.views([U]))[0]!.health).toBe('up');
    expect((await b.s.views([U]))[0]!.health).toBe('up');
  });
});

describe('item 8: lease expiry under long requests and skewed clocks', () => {
  it('a request longer than lease_max_age_ms keeps its lease while the replica reports its adapter running', async () => {
    const p = prefix();
    const a = await node(p, 'nA');
    const b = await node(p, 'nB');
    await a.s.applySnapshot(U, poll());
    await a.s.acquire(lease('A1'));
    const MAX_AGE = 300;
    // Three max ages: well past one, short of the ceiling where renewal stops.
    const end = Date.now() + (LEASE_CEILING - 1) * MAX_AGE;
    while (Date.now() < end) {
      await sleep(60);
      await b.s.applySnapshot(U, poll(['a'])); // B's poll: the replica runs a request for `a`
      expect(await b.s.expireLeases(Date.now(), MAX_AGE)).toEqual([]);
    }
    expect(await b.s.beginUnload(U, 'a', Date.now(), TTL)).toBeNull();
    // Once the replica no longer runs it (its log phase was lost), the lease ages out.
    await b.s.applySnapshot(U, poll([]));
    await waitFor(
      async () => (await b.s.expireLeases(Date.now(), MAX_AGE)).length === 1,
      3000,
      'lease reclaimed once idle on the replica',
    );
  });

  it('a node whose clock runs 200 ms behind does not lose a fresh lease to another node', async () => {
    const p = prefix();
    const behind = await node(p, 'nBehind');
    const other = await node(p, 'nOther');
    await behind.s.applySnapshot(U, poll());
    const SKEW = 200;
    await behind.s.acquire(lease('B1', Date.now() - SKEW)); // the acquiring node's clock
    // Right away, another node with a correct clock reclaims leases older than 150 ms.
    expect(await other.s.expireLeases(Date.now(), 150)).toEqual([]);
    expect(await other.s.beginUnload(U, 'a', Date.now(), TTL)).toBeNull();
  });

  it('a node whose clock runs 200 ms ahead does not reclaim a fresh lease of another node', async () => {
    const p = prefix();
    const holder = await node(p, 'nHolder');
    const ahead = await node(p, 'nAhead');
    await holder.s.applySnapshot(U, poll());
    await holder.s.acquire(lease('H1'));
    expect(await ahead.s.expireLeases(Date.now() + 200, 150)).toEqual([]);
  });
});

describe('item 7: an outage does not reset the cold-load budget', () => {
  const LIMIT = 6;
  const WINDOW = 60_000;
  const spend = async (n: Node, times: number) => {
    let ok = 0;
    for (let i = 0; i < times; i++)
      if ((await n.s.spendBudget('fleet', LIMIT, WINDOW, Date.now())) === 0) ok++;
    return ok;
  };
  /** Three nodes on one state, each through its own hop, each knowing that three share the budget. */
  const threeNodes = async () => {
    const p = prefix();
    const ns = [
      await node(p, 'n0', { viaProxy: true }),
      await node(p, 'n1', { viaProxy: true }),
      await node(p, 'n2', { viaProxy: true }),
    ];
    await waitFor(async () => (await admin.zcard(`${p}nodes`)) === 3, 8000, 'three heartbeats');
    await beganLongAgo(p);
    // Each decision's reply tells a node how many share the budget.
    for (const n of ns) await n.s.views([U]);
    return { p, ns };
  };

  it('three nodes cut off within the window get at most one more budget between them', async () => {
    const { ns } = await threeNodes();
    let granted = await spend(ns[0]!, LIMIT + 2); // the shared budget: 6 granted, 2 refused
    expect(granted).toBe(LIMIT);
    for (const n of ns) n.proxy!.cut('refuse');
    for (const n of ns) granted += await spend(n, LIMIT);
    expect(ns.every((n) => n.s.mode() === 'local')).toBe(true);
    // The budget plus one window: 12, not (3 + 1) x 6.
    expect(granted).toBeLessThanOrEqual(2 * LIMIT);
  });

  it("after the state is emptied, a node cut off before the others' heartbeats came back grants only its share", async () => {
    const { p, ns } = await threeNodes();
    // Redis emptied (a restart without persistence, or FLUSHALL): the live nodes' heartbeats
    // come back over the next node_ttl_ms / 4; node 0's next decision comes first.
    const keys = await admin.keys(`${p}*`);
    if (keys.length > 0) await admin.del(...keys);
    await ns[0]!.s.views([U]);
    ns[0]!.proxy!.cut('refuse');
    const granted = await spend(ns[0]!, LIMIT);
    expect(ns[0]!.s.mode()).toBe('local');
    // Its share of three nodes: 2, not the whole budget of a node that thinks it is alone.
    expect(granted).toBeLessThanOrEqual(Math.floor(LIMIT / 3));
  });

  it('nodes of a fleet starting up, cut off before the state is node_ttl_ms old, grant at most one budget between them', async () => {
    const p = prefix();
    const ns: Node[] = [];
    // Each registers and decides once before the next starts: the count it reads is the nodes
    // heard so far (1, 2, 3), the later ones missing (the simulation's seeds 5060, 1063116).
    for (const id of ['n0', 'n1', 'n2']) {
      const n = await node(p, id, { viaProxy: true });
      await waitFor(async () => (await admin.zcard(`${p}nodes`)) === ns.length + 1, 8000, 'its heartbeat');
      await n.s.views([U]);
      ns.push(n);
    }
    for (const n of ns) n.proxy!.cut('refuse');
    let granted = 0;
    for (const n of ns) granted += await spend(n, LIMIT);
    expect(ns.every((n) => n.s.mode() === 'local')).toBe(true);
    // None knows the fleet yet: nothing alone (6 + 3 + 2 before, shares of 1, 2 and 3 nodes).
    expect(granted).toBeLessThanOrEqual(LIMIT);
  });

  it('nodes cut off one after another stay within twice the budget: a count that went down is held for the window', async () => {
    const p = prefix();
    const ns: Node[] = [];
    for (const id of ['n0', 'n1', 'n2']) ns.push(await node(p, id, { viaProxy: true, nodeTtlMs: 500 }));
    await waitFor(async () => (await admin.zcard(`${p}nodes`)) === 3, 8000, 'three heartbeats');
    await beganLongAgo(p);
    for (const n of ns) await n.s.views([U]);
    /** The last node cut off falls silent past node_ttl_ms: a sweep drops it from the count. */
    const swept = async (left: number, by: Node) =>
      waitFor(
        async () => {
          await by.shared.expireLeases(Date.now(), 60_000);
          return (await admin.zcard(`${p}nodes`)) === left;
        },
        8000,
        `${left} node(s) left in the count`,
      );
    // C spends the shared window's whole budget, then is cut off (its share spent).
    let granted = await spend(ns[2]!, LIMIT);
    ns[2]!.proxy!.cut('refuse');
    granted += await spend(ns[2]!, LIMIT);
    // Once C is swept, B reads 2 nodes and is cut off; once B is swept, A reads 1 and is cut off.
    await swept(2, ns[1]!);
    await ns[1]!.s.views([U]);
    ns[1]!.proxy!.cut('refuse');
    granted += await spend(ns[1]!, LIMIT);
    await swept(1, ns[0]!);
    await ns[0]!.s.views([U]);
    ns[0]!.proxy!.cut('refuse');
    granted += await spend(ns[0]!, LIMIT);
    expect(ns.every((n) => n.s.mode() === 'local')).toBe(true);
    // 6 + 2 + 2: each keeps the three it saw for the window (6 + 3 + 6 = 15 before).
    expect(granted).toBeLessThanOrEqual(2 * LIMIT);
  });

  it('a runtime replaced on the same state keeps the count its predecessor held for the window', async () => {
    const p = prefix();
    const ns: Node[] = [];
    for (const id of ['n0', 'n1', 'n2']) ns.push(await node(p, id, { viaProxy: true, nodeTtlMs: 500 }));
    await waitFor(async () => (await admin.zcard(`${p}nodes`)) === 3, 8000, 'three heartbeats');
    await beganLongAgo(p);
    for (const n of ns) await n.s.views([U]);
    const swept = async (left: number) =>
      waitFor(
        async () => {
          await ns[2]!.shared.expireLeases(Date.now(), 60_000);
          return (await admin.zcard(`${p}nodes`)) === left;
        },
        8000,
        `${left} node(s) left in the count`,
      );
    // Nodes 0 and 1 are cut off in turn and swept; node 2's store reads 1 but holds the 3 it saw.
    ns[0]!.proxy!.cut('refuse');
    await swept(2);
    ns[1]!.proxy!.cut('refuse');
    await swept(1);
    expect(ns[2]!.shared.liveNodes).toBe(3);
    // Node 2's `redis` record changes on the same state (its lora-poller's timeout differs from its
    // router's): a new store, the same node id, succeeding the old one as FleetRuntime.retire does,
    // before its own link answers; its link reads the one node left.
    const config = redis.config(p, { node_ttl_ms: 500, port: ns[2]!.proxy!.port, timeout: 301 });
    const shared = new RedisFleetStore(config, 'n2');
    const next: Node = {
      s: new FailoverFleetStore(shared, silentLogger, { probeMs: 50, logEveryMs: 60_000 }),
      shared,
      proxy: ns[2]!.proxy!,
    };
    stores.push(next.s);
    await next.s.succeed(ns[2]!.s);
    await next.s.views([U]);
    await sleep(500); // heartbeats every 125 ms: its link has read the count
    ns[2]!.proxy!.cut('refuse');
    // Its share is 6 / 3, as its predecessor's: 6 before (its own link's count of 1).
    expect(await spend(next, LIMIT)).toBe(LIMIT / 3);
    expect(next.s.mode()).toBe('local');
  });

  it('a node restarted during the outage grants nothing cold until it has heard from the fleet', async () => {
    const { p, ns } = await threeNodes();
    let granted = await spend(ns[0]!, LIMIT); // the shared budget, spent by one node
    for (const n of ns) n.proxy!.cut('refuse');
    // Node 2's process restarts (Kong restarts a plugin server that died): a new node id, nothing
    // in memory, its link to Redis still cut.
    await ns[2]!.s.close();
    const restarted = await nodeCutOff(p, 'n2b', ns[2]!.proxy!);
    granted += await spend(restarted, LIMIT);
    for (const n of ns.slice(0, 2)) granted += await spend(n, LIMIT);
    expect(restarted.s.mode()).toBe('local');
    // The budget plus one window at most: 12, not 16 (a restarted node granting the whole budget).
    expect(granted).toBeLessThanOrEqual(2 * LIMIT);
  });

  it('a node restarted before the outage, once back on Redis, keeps the fleet within the bound though it forgot its spends', async () => {
    const { p, ns } = await threeNodes();
    let granted = await spend(ns[0]!, LIMIT);
    // Node 0's process restarts with Redis up: its predecessor's spends are in Redis, not in it.
    await ns[0]!.s.close();
    const again = await node(p, 'n0b', { viaProxy: true });
    await waitFor(async () => (await admin.zcard(`${p}nodes`)) === 4, 8000, "the new process's heartbeat");
    for (const n of [again, ...ns.slice(1)]) await n.s.views([U]);
    for (const n of [again, ...ns.slice(1)]) n.proxy!.cut('refuse');
    for (const n of [again, ...ns.slice(1)]) granted += await spend(n, LIMIT);
    // The old process still counts among the nodes (silent for less than node_ttl_ms), so the
    // new one's share is smaller, not larger: within the budget plus one window.
    expect(granted).toBeLessThanOrEqual(2 * LIMIT);
    expect(again.s.mode()).toBe('local');
  });

  it('a runtime replaced on the same state during the outage keeps its view of the fleet and what it spent', async () => {
    const { p, ns } = await threeNodes();
    expect(await spend(ns[0]!, 1)).toBe(1);
    for (const n of ns) n.proxy!.cut('refuse');
    // A `redis` record change on the same state (another timeout): same node id, a new store
    // that never reached Redis, its predecessor's records not adopted yet, then adopted.
    const next = await nodeCutOff(p, 'n0', ns[0]!.proxy!);
    next.s.predecessor = ns[0]!.s;
    ns[0]!.s.superseded = true;
    // Its share, 6 / 3, less the one spent before the outage.
    expect(await spend(next, LIMIT)).toBe(1);
    await next.s.adopt(ns[0]!.s);
    expect(await spend(next, LIMIT)).toBe(0);
  });

  it('a node that spent the whole budget before the outage is not granted it again in the same window', async () => {
    const a = await node(prefix(), 'nA', { viaProxy: true });
    await a.s.views([U]);
    expect(await spend(a, LIMIT)).toBe(LIMIT);
    a.proxy!.cut('refuse');
    // Alone it knows what it spent in the window: its share is what is left of it, none.
    expect(await spend(a, LIMIT)).toBe(0);
    expect(a.s.mode()).toBe('local');
  });

  it('an emptied Redis does not reset the window: each node re-publishes its own spends with its leases', async () => {
    const p = prefix();
    const a = await node(p, 'nA');
    const b = await node(p, 'nB');
    await a.s.applySnapshot(U, poll());
    expect(await spend(a, 2)).toBe(2);
    expect(await spend(b, 2)).toBe(2);
    await admin.flushall(); // or a restart without persistence, or a `redis` database change
    // Each notices on its next decision (the one round trip it makes anyway) and re-publishes.
    await a.s.views([U], { name: 'a' });
    await b.s.views([U], { name: 'a' });
    // 4 of the window's 6 were spent before the flush: 2 are left, not a fresh 6.
    expect((await spend(a, LIMIT)) + (await spend(b, LIMIT))).toBe(LIMIT - 4);
  });

  it("a degraded node's spends count in Redis once it is back, within the same window", async () => {
    const p = prefix();
    const a = await node(p, 'nA', { viaProxy: true });
    const b = await node(p, 'nB');
    const c = await node(p, 'nC');
    await waitFor(async () => (await admin.zcard(`${p}nodes`)) === 3, 8000, 'three heartbeats');
    await beganLongAgo(p);
    await a.s.views([U]);
    a.proxy!.cut('refuse');
    const local = await spend(a, LIMIT); // its share: 6 / 3 nodes
    expect(local).toBe(LIMIT / 3);
    a.proxy!.restore();
    await waitFor(() => a.s.mode() === 'redis', 10_000, 'recovery');
    // The others get what is left of the window's budget, not a whole one.
    expect((await spend(b, LIMIT)) + (await spend(c, LIMIT))).toBe(LIMIT - local);
  });
});
