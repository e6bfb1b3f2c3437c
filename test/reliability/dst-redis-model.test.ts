/**
 * The simulation's Redis model (dst/redis-model.ts) ends load and unload locks as the `expire`
 * script does (src/fleet/redis/scripts/leases.ts): those of nodes found silent in that call (in
 * `nodes`, last heartbeat older than nodeTtl) and those past their expiry, not those of a node
 * simply absent from `nodes`, as every node is right after a FLUSHALL until its next heartbeat.
 */
import { RedisModel } from '../../dst/redis-model';
import { Scheduler } from '../../dst/scheduler';
import type { RedisConfig } from '../../src/config/redis-schema';
import { seededRandom } from '../../src/random';

const URL = 'http://replica-1:8000';
const NODE_TTL = 2000;

function model(): RedisModel {
  const random = seededRandom(1);
  return new RedisModel(new Scheduler(random), {} as RedisConfig, random);
}

/** A model on a scheduler of its own, with `until(t)` running that scheduler to simulated time t. */
function timedModel(): { clock: Scheduler; m: RedisModel; until: (t: number) => Promise<void> } {
  const random = seededRandom(1);
  const clock = new Scheduler(random);
  const m = new RedisModel(clock, { node_ttl_ms: NODE_TTL, timeout: 1000 } as RedisConfig, random);
  const until = (t: number) =>
    clock.run(
      t,
      () => {},
      () => false,
    );
  return { clock, m, until };
}

async function registered(m: RedisModel): Promise<void> {
  await m.apply('upsert', [{ url: URL, backend: 'vllm', priority: 0 }, 0, 'epoch-1', 0]);
}

describe('the simulated Redis ends locks as the expire script does', () => {
  it("keeps the load lock of a node that has not heartbeated since the state was emptied (dst seed 10's kind)", async () => {
    const m = model();
    await registered(m);
    await m.apply('heartbeat', ['n2', 0]);
    const fence = await m.apply('beginLoad', [URL, 'chat', 10, 8000, 'n0', 1]);
    expect(fence).not.toBeNull();
    await m.apply('expireLeases', [100, 4000, NODE_TTL, 60_000]);
    // n0's load is still under way: n2 must not get the same adapter's load lock.
    expect(await m.apply('beginLoad', [URL, 'chat', 110, 8000, 'n2', 1])).toBeNull();
  });

  it('ends the load lock of a node whose heartbeat is older than nodeTtl', async () => {
    const m = model();
    await registered(m);
    await m.apply('heartbeat', ['n0', 0]);
    await m.apply('heartbeat', ['n2', 2900]);
    expect(await m.apply('beginLoad', [URL, 'chat', 10, 8000, 'n0', 1])).not.toBeNull();
    await m.apply('expireLeases', [3000, 4000, NODE_TTL, 60_000]);
    expect(await m.apply('beginLoad', [URL, 'chat', 3010, 8000, 'n2', 1])).not.toBeNull();
  });
  it('an expired load lock drops its entry and no more, as endlock: a poll begun before the expiry that lists the adapter adopts it', async () => {
    const m = model();
    await registered(m);
    await m.apply('heartbeat', ['n0', 0]);
    await m.apply('applySnapshot', [URL, { at: 1, ok: true, registry: [] }]);
    expect(await m.apply('beginLoad', [URL, 'chat', 10, 1000, 'n0', 1])).not.toBeNull();
    await m.apply('heartbeat', ['n0', 1100]);
    // Past the lock's expiry (1010): its holder stalled. The script forgets the load (`dropres`),
    // it does not mark the adapter gone, so the next poll adopts it if it landed.
    await m.apply('expireLeases', [1100, 4000, NODE_TTL, 60_000]);
    const landed = {
      at: 1200,
      startedAt: 500,
      ok: true,
      registry: [{ name: 'chat', path: '/adapters/chat' }],
    };
    await m.apply('applySnapshot', [URL, landed]);
    const residents = (await m.apply('residents', [URL])) as { name: string }[];
    expect(residents.map((r) => r.name)).toEqual(['chat']);
  });
});

describe('the simulated Redis publishes "changed" where the scripts call changed()', () => {
  const lease = (id: string, adapter: string | null) => ({ id, url: URL, adapter, at: 0 });

  async function published(m: RedisModel, name: string, args: unknown[]): Promise<number> {
    const publish = jest.spyOn(m, 'publish');
    publish.mockClear();
    await m.apply(name, args);
    const n = publish.mock.calls.length;
    publish.mockRestore();
    return n;
  }

  it("records each lock's life in the scripts' order: ended by its holder, by the expiry, or with the state", async () => {
    // The room check reads the store's counts by these lives (seeds 501915, 640336): a failed load's
    // end runs after a grant it was sent before; a dead node's unload lock lasts until it is found silent.
    const m = model();
    await registered(m);
    await m.apply('heartbeat', ['n0', 0]);
    await m.apply('heartbeat', ['n1', 2900]);
    const load = (await m.apply('beginLoad', [URL, 'chat', 10, 8000, 'n1', 2])) as number;
    await m.apply('finishLoad', [URL, 'chat', load, true, 20]);
    const other = (await m.apply('beginLoad', [URL, 'code', 30, 8000, 'n1', 2])) as number;
    const u = (await m.apply('beginUnload', [URL, 'chat', 40, 8000, 'n0', 'x', 2])) as number;
    const [l, ul, ol] = [m.lockLife(load)!, m.lockLife(u)!, m.lockLife(other)!];
    expect(l.endSeq! > l.seq && ol.seq > l.endSeq! && ul.seq > ol.seq).toBe(true);
    expect([ul.endSeq, ol.endSeq]).toEqual([undefined, undefined]);
    await m.apply('expireLeases', [3000, 4000, NODE_TTL, 60_000]); // n0 silent: its unload lock ends
    expect([ul.endedAt, ol.endSeq]).toEqual([3000, undefined]);
    m.flushAll(); // the state lost: every lock in it ends
    expect(ol.endSeq! > ul.endSeq!).toBe(true);
  });

  it('a lease taken publishes nothing; released, only the last of its adapter on the replica does', async () => {
    const m = model();
    await registered(m);
    expect(await published(m, 'acquire', [lease('l1', 'chat'), 'n0'])).toBe(0);
    expect(await published(m, 'acquire', [lease('l2', 'chat'), 'n1'])).toBe(0);
    expect(await published(m, 'acquire', [lease('l3', null), 'n1'])).toBe(0);
    expect(await published(m, 'release', ['l1', 10])).toBe(0);
    // A base-model lease is no adapter's: its release leaves none idle.
    expect(await published(m, 'release', ['l3', 10])).toBe(0);
    expect(await published(m, 'release', ['l2', 10])).toBe(1);
    // Released already: nothing changed.
    expect(await published(m, 'release', ['l2', 10])).toBe(0);
  });

  it('a load or unload finished publishes while its fence is current; a stale one does not', async () => {
    const m = model();
    await registered(m);
    const fence = await m.apply('beginLoad', [URL, 'chat', 10, 8000, 'n0', 4]);
    expect(await published(m, 'finishLoad', [URL, 'chat', fence, true, 20])).toBe(1);
    expect(await published(m, 'finishLoad', [URL, 'chat', fence, true, 30])).toBe(0);
  });

  it('an expiry publishes for each adapter it leaves idle and each lock it ends on its adapter; a prune once it dropped one', async () => {
    const m = model();
    await registered(m);
    await m.apply('heartbeat', ['n0', 0]);
    await m.apply('acquire', [lease('l1', 'chat'), 'n0']);
    await m.apply('acquire', [lease('l2', 'sql'), 'n0']);
    await m.apply('beginLoad', [URL, 'code', 10, 100, 'n0', 4]);
    // Nothing old enough yet.
    expect(await published(m, 'expireLeases', [50, 4000, 60_000, 60_000])).toBe(0);
    // The lock past its expiry, and both leases past lease_max_age_ms (Redis's clock: the scheduler's, at 0).
    expect(await published(m, 'expireLeases', [200, -1, 60_000, 60_000])).toBe(3);
    await m.apply('acquire', [lease('l3', 'chat'), 'n1']);
    await m.apply('acquire', [lease('l4', null), 'n1']);
    expect(await published(m, 'prune', ['n1', ['l3', 'l4'], false, 300])).toBe(0);
    // l4 dropped (no adapter: a changed() of its own), then l3 (chat idle: one more).
    expect(await published(m, 'prune', ['n1', ['l3'], false, 300])).toBe(1);
    expect(await published(m, 'prune', ['n1', [], false, 300])).toBe(2);
  });
});

describe("the simulated Redis's links count the nodes as RedisFleetStore does", () => {
  it('a count read before the state is node_ttl_ms old is no count, or a floor over one seen before (seeds 5560, 1048867)', async () => {
    const { clock, m, until } = timedModel();
    const spec = { url: URL, backend: 'vllm', priority: 0 } as const;
    const [n0, n1] = [m.link('n0', clock), m.link('n1', clock)];
    await until(50);
    void n0.upsertReplica(spec);
    await until(600); // a heartbeat each since the epoch began
    // Both counted, but the state is young: a node not heard from yet would be missing.
    expect([n0.liveNodes, n1.liveNodes]).toEqual([null, null]);
    await until(NODE_TTL + 600);
    expect([n0.liveNodes, n1.liveNodes]).toEqual([2, 2]);
    // Emptied: node 0 registers again first and reads itself alone; it keeps counting two.
    m.flushAll();
    void n0.upsertReplica(spec);
    await until(NODE_TTL + 650);
    void n0.views([URL]);
    await until(NODE_TTL + 700);
    expect(n0.liveNodes).toBe(2);
  });
});

describe("the simulated Redis's epochs are unique, as the upsert script's random ones", () => {
  it('a runtime replaced on the same state (one node id, a new link) begins an emptied state with an epoch no other link saw (seed 150271)', async () => {
    const { clock, m, until } = timedModel();
    const spec = { url: URL, backend: 'vllm', priority: 0 } as const;
    const old = m.link('n0', clock);
    const peer = m.link('n2', clock);
    void old.upsertReplica(spec);
    await until(50);
    void peer.views([URL]);
    await until(100);
    const before = m.epoch;
    expect(peer.currentEpoch).toBe(before);
    // Emptied between two heartbeats; then node 0's new runtime (same node id) registers first.
    m.flushAll();
    const successor = m.link('n0', clock);
    void successor.upsertReplica(spec);
    await until(150);
    expect(m.epoch).not.toBeNull();
    expect(m.epoch).not.toBe(before);
    // The old runtime and the peer learn of it from their next reply, whichever it is.
    const lost = jest.fn();
    old.onStateLost = lost;
    peer.onStateLost = lost;
    await until(NODE_TTL / 4 + 200);
    expect(lost).toHaveBeenCalledTimes(2);
    expect(peer.takeStateLost()).toBe(true);
  });
});

describe("the simulated Redis's link is one stream, as RedisConnection's", () => {
  it('a reply the old server still owes fails once a call reaches the new one, never after it (seed 140805)', async () => {
    const { clock, m, until } = timedModel();
    const link = m.link('n0', clock);
    void link.upsertReplica({ url: URL, backend: 'vllm', priority: 0 });
    await until(50);
    void link.acquire({ id: 'n0-0', url: URL, adapter: 'chat', at: 50 });
    await until(100);
    // The release runs at the primary, its reply slow; the switch loses the release.
    link.faults.slowMs = 400;
    let outcome = 'pending';
    link.release('n0-0', 100).then(
      () => (outcome = `answered at ${clock.now()}`),
      (err: Error) => (outcome = `failed at ${clock.now()}: ${err.message}`),
    );
    await until(110);
    link.faults.slowMs = 0;
    m.switchPrimary(1);
    await until(150);
    expect(outcome).toBe('pending');
    // The next call reaches the new server (told of the switch): the old stream closed before that.
    void link.views([URL]).catch(() => {});
    await until(700);
    expect(outcome).toMatch(/^failed at 15[0-9]: Connection is closed/);
    // It ran at the old server, and the new one lacks it: the caller must send it again.
    expect(m.openLeases().has('n0-0')).toBe(true);
  });
});

describe("the simulated Redis's link keeps its order, as one TCP connection does", () => {
  // ioredis writes every command of a client on its one stream and matches each reply to the
  // oldest command written (lib/Redis.ts `sendCommand`, lib/DataHandler.ts `shiftCommand`, v5.11.1);
  // Redis runs one connection's commands in the order they arrive.
  const SPEC = { url: URL, backend: 'vllm', priority: 0 } as const;

  /** A model whose links' trips read `draw.next` (0.99: a 2 ms trip, 0: none, 0.5: 1 ms), on a scheduler of its own. */
  function scriptedTrips() {
    const clock = new Scheduler(seededRandom(1));
    const draw = { next: 0.5 };
    const m = new RedisModel(clock, { node_ttl_ms: NODE_TTL, timeout: 1000 } as RedisConfig, () => draw.next);
    const until = (t: number) =>
      clock.run(
        t,
        () => {},
        () => false,
      );
    const ran: string[] = [];
    const apply = m.apply.bind(m);
    jest.spyOn(m, 'apply').mockImplementation((name, args) => {
      ran.push(`${name} at ${clock.now()}`);
      return apply(name, args);
    });
    return { clock, draw, m, until, ran };
  }

  it("a call runs no earlier than the call sent before it on the link, whatever their trips drew (seed 500849's kind)", async () => {
    const { clock, draw, m, until, ran } = scriptedTrips();
    const link = m.link('n0', clock);
    void link.upsertReplica(SPEC);
    await until(10);
    let fence: number | null = null;
    void link.beginLoad(URL, 'a', 10, 2, 8000).then((f) => (fence = f));
    await until(20);
    expect(fence).not.toBeNull();
    ran.length = 0;
    // The claim's end drew a 2 ms trip, the unload sent just after it none.
    draw.next = 0.99;
    void link.finishLoad(URL, 'a', fence!, false, 20);
    draw.next = 0;
    void link.beginUnload(URL, 'team', 20, 8000, 'med', 2);
    draw.next = 0.5;
    await until(30);
    expect(ran.filter((r) => !r.startsWith('heartbeat'))).toEqual(['finishLoad at 22', 'beginUnload at 22']);
  });

  it("a call's answer returns no earlier than the previous call's answer", async () => {
    const { clock, m, until } = scriptedTrips();
    const link = m.link('n0', clock);
    void link.upsertReplica(SPEC);
    await until(10);
    void link.acquire({ id: 'n0-0', url: URL, adapter: 'chat', at: 10 });
    await until(20);
    const answered: string[] = [];
    // The release's reply is slow; the touch sent after the link turned fast again.
    link.faults.slowMs = 400;
    void link.release('n0-0', 20).then(() => answered.push(`release at ${clock.now()}`));
    link.faults.slowMs = 0;
    void link.touch(URL, 'chat', 20).then(() => answered.push(`touch at ${clock.now()}`));
    await until(600);
    expect(answered).toEqual(['release at 422', 'touch at 422']);
  });

  it('a call a partition lost holds back no later call: it never entered the stream (seeds 26829, 30642 ruled out)', async () => {
    const { clock, m, until } = scriptedTrips();
    const link = m.link('n0', clock);
    void link.upsertReplica(SPEC);
    await until(10);
    const answered: string[] = [];
    link.faults.partitioned = true;
    link.release('n0-0', 10).catch((err: Error) => answered.push(`release ${err.message} at ${clock.now()}`));
    link.faults.partitioned = false;
    void link.touch(URL, 'chat', 10).then(() => answered.push(`touch at ${clock.now()}`));
    await until(1100);
    expect(answered).toEqual(['touch at 12', 'release Command timed out (release) at 1010']);
  });
});

describe("the simulated Redis takes a node's leases again as the retake script does", () => {
  it('one script for the batch: each lease as acquire takes it, one the expiry reclaimed refused and not brought back', async () => {
    const { m, until } = timedModel();
    await registered(m);
    const link = m.link('n0', m.clock);
    const lease = (id: string) => ({ id, url: URL, adapter: 'chat', at: 0 });
    const taken = link.acquire(lease('old'));
    await until(50);
    await taken;
    await m.apply('expireLeases', [5000, 4000, NODE_TTL, 16_000]);
    const applied: string[] = [];
    const apply = m.apply.bind(m);
    m.apply = (name, args) => (applied.push(name), apply(name, args));
    const retaken = link.retake([lease('a'), lease('old'), lease('b')]);
    await until(100);
    expect(await retaken).toEqual(['old']);
    expect(applied).toEqual(['retake']);
    expect([...m.openLeases()].sort()).toEqual([
      ['a', 'n0'],
      ['b', 'n0'],
    ]);
  });
});

describe('a Sentinel switch that keeps a load lock', () => {
  it('ends only the locks the promoted replica lacks: one whose grant it has lives on (seed 662665)', async () => {
    const { m, until } = timedModel();
    await m.apply('upsert', [{ url: URL, backend: 'vllm', priority: 0 }, 0, 'epoch-1', 0]);
    const kept = (await m.apply('beginLoad', [URL, 'bio', 10, 8000, 'n1', 2])) as number;
    const lost = (await m.apply('beginLoad', [URL, 'code', 20, 8000, 'n1', 2])) as number;
    m.switchPrimary(1); // the replica promoted missed the last write: code's grant, not bio's
    await until(50);
    // The promoted replica still counts bio loading (the store grants unloads by it): its lock lives on.
    expect((await m.store.residents(URL)).map((a) => `${a.name}:${a.state}`)).toEqual(['bio:loading']);
    expect(m.lockLife(kept)!.endSeq).toBeUndefined();
    expect(m.lockLife(lost)!.endSeq).toBeDefined();
  });
});

describe("the simulated Redis's budget calls, as scripts/budget.ts runs them", () => {
  it('an add of several units is one script: a spend begun beside it sees all of them, and the ledger lists them in the order they ran (seed 2219256)', async () => {
    const clock = new Scheduler(seededRandom(1));
    // Every trip drawn alike: the two calls a node sent at once reach the server in one step, the add first.
    const m = new RedisModel(clock, { node_ttl_ms: NODE_TTL, timeout: 1000 } as RedisConfig, () => 0.5);
    const until = (t: number) =>
      clock.run(
        t,
        () => {},
        () => false,
      );
    const link = m.link('n0', clock);
    const added = link.addToBudget('fleet', 2, 60_000);
    const spent = link.takeBudget('fleet', 2, 60_000, 0);
    await until(100);
    await added;
    expect((await spent).waitMs).toBeGreaterThan(0);
    expect(m.budget.map((op) => op.op)).toEqual(['add', 'spend']);
  });

  /** A model with a unit spent and given back on node n0's link, by 20 ms. */
  async function refunded() {
    const { clock, m, until } = timedModel();
    const link = m.link('n0', clock);
    const spent = link.takeBudget('fleet', 1, 60_000, 0);
    await until(10);
    const back = link.refundBudget((await spent).window!, 1, 10);
    await until(20);
    expect(await back).toBe(1);
    return { clock, m, until };
  }

  it('a refund a Sentinel switch lost is marked lost: the window counts its unit again (seed 2228354)', async () => {
    const { clock, m, until } = await refunded();
    m.switchPrimary(1);
    await until(40);
    expect(m.budget.map((op) => [op.op, op.op === 'refund' ? op.lost : undefined])).toEqual([
      ['spend', undefined],
      ['refund', true],
    ]);
    expect((await m.link('n1', clock).takeBudget('fleet', 1, 60_000, 40)).waitMs).toBeGreaterThan(0);
  });

  it('a refund a switch kept, then a second switch lost, is marked lost (its replay keeps its order)', async () => {
    const { m, until } = await refunded();
    await m.apply('heartbeat', ['n0', 25]);
    m.switchPrimary(1);
    await until(40);
    expect(m.budget.some((op) => op.op === 'refund' && op.lost)).toBe(false);
    m.switchPrimary(1);
    await until(60);
    expect(m.budget.some((op) => op.op === 'refund' && op.lost)).toBe(true);
  });
});

describe("the simulated Redis's links forget replicas as the retain script does (scripts/forgetting.ts)", () => {
  it('keeps a replica a live node claims (its heartbeats), forgets it once that node is silent past node_ttl_ms and the grace', async () => {
    const { clock, m, until } = timedModel();
    const spec = { url: URL, backend: 'vllm', priority: 0 } as const;
    const [n0, n1] = [m.link('n0', clock), m.link('n1', clock)];
    void n0.upsertReplica(spec);
    void n1.upsertReplica(spec);
    await until(200);
    const answers: string[][] = [];
    /** n0 routes to nothing: its retain sent at `t`, answered by `t` + 200. */
    const retainAt = async (t: number) => {
      await until(t);
      void n0.retainReplicas([], 100).then((gone) => answers.push(gone));
      await until(t + 200);
    };
    await retainAt(200); // n0 drops its claim; n1's holds
    // n1 claimed over node_ttl_ms ago: its heartbeats keep its claim live.
    await retainAt(NODE_TTL + 600);
    expect(await m.store.replicaSpecs()).toEqual([spec]);
    await n1.close(); // its heartbeats stop
    await retainAt(3 * NODE_TTL);
    expect(answers).toEqual([[], [], [URL]]);
    expect(await m.store.replicaSpecs()).toEqual([]);
    expect((await m.store.events(1))[0]).toMatchObject({ url: URL, op: 'replica-forgotten' });
  });

  it("drops a silent node's claims at the expiry sweep, and a leaving node's at its prune", async () => {
    const { clock, m, until } = timedModel();
    const spec = { url: URL, backend: 'vllm', priority: 0 } as const;
    const [n0, n1, n2] = [m.link('n0', clock), m.link('n1', clock), m.link('n2', clock)];
    for (const n of [n0, n1, n2]) void n.upsertReplica(spec);
    await until(200);
    const claimers = () =>
      [
        ...((m.store as unknown as { claims: { byUrl: Map<string, Map<string, number>> } }).claims.byUrl
          .get(URL)
          ?.keys() ?? []),
      ].sort();
    expect(claimers()).toEqual(['n0', 'n1', 'n2']);
    void n2.prune(() => [], true);
    await until(400);
    expect(claimers()).toEqual(['n0', 'n1']);
    await n1.close();
    await until(3 * NODE_TTL);
    void n0.expireLeases(0, 60_000);
    await until(3 * NODE_TTL + 200);
    expect(claimers()).toEqual(['n0']);
  });
});
