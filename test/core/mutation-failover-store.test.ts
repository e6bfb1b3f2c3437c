/**
 * Unit test of FailoverFleetStore's recovery (src/fleet/redis/failover-store.ts, one module),
 * written against the survivors of its mutation run (docs/reliability/mutation-testing.md): what
 * a node hands the shared store after deciding alone (its replicas, its leases, its missed
 * releases and lock ends, a prune of what it released) and after finding the state emptied, and
 * that it shares decisions again only once all of it is there. The shared side is the in-process
 * store with a switch that fails every call (as in failover-clock.test.ts) and a recording
 * `prune`; the clock is virtual, so a probe runs when the test says.
 */
import { sleep, VirtualClock } from '../../src/clock';
import { MemoryFleetStore, PASSIVE_FAILURE_LIMIT } from '../../src/fleet/memory-store';
import { FailoverFleetStore } from '../../src/fleet/redis/failover-store';
import type { SharedStore } from '../../src/fleet/redis/shared-store';
import type { Lease } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';
import { snapshotWithA } from './helpers';

const U = 'http://10.0.0.1:8000';
const PROBE = 1_000;
const lease = (id: string, at = 2): Lease => ({ id, url: U, adapter: 'a', at });

/** The shared side: an in-process store that fails every call while `down`, recording prunes. */
function fakeShared() {
  const down = { value: false };
  const lost = { value: false };
  const prunes: string[][] = [];
  /** Whether each prune was a leaving one. */
  const leaving: boolean[] = [];
  /** Every call sent, answered or not. */
  const calls: string[] = [];
  /** The budget adds it took (key, count), and how many more it refuses (the link lost mid-call). */
  const adds: [string, number][] = [];
  const failAdds = { value: 0 };
  /** Run before a call of that name is sent (a test's interleaving: an emptying between two writes). */
  const before: Record<string, (() => void) | undefined> = {};
  let inner = new MemoryFleetStore();
  const extra = {
    // The fleet as its heartbeats read it, and the epoch that dates the budget spends.
    liveNodes: 3,
    currentEpoch: 'e1' as string | null,
    addToBudget: async (key: string, count: number) => {
      if (failAdds.value > 0 && failAdds.value--) throw new Error('connection lost');
      adds.push([key, count]);
    },
    ping: async () => 'PONG',
    prune: async (held: () => string[], leaves?: boolean) => {
      prunes.push(held());
      leaving.push(leaves === true);
      return 0;
    },
    takeStateLost: () => {
      const was = lost.value;
      lost.value = false;
      return was;
    },
    onStateLost: null as (() => void) | null,
  };
  const store = new Proxy(extra, {
    get(target, key) {
      if (key === 'onStateLost') return target.onStateLost;
      const own = key in target ? (target as Record<string | symbol, unknown>)[key] : undefined;
      const v = own ?? (Reflect.get(inner, key, inner) as unknown);
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        calls.push(String(key));
        before[String(key)]?.();
        if (down.value && key !== 'takeStateLost') return Promise.reject(new Error('shared store down'));
        return (v as (...a: unknown[]) => unknown).apply(own ? target : inner, args);
      };
    },
    set(target, key, value) {
      if (key === 'onStateLost') target.onStateLost = value as (() => void) | null;
      return true;
    },
  }) as unknown as SharedStore;
  return {
    store,
    down,
    lost,
    prunes,
    leaving,
    calls,
    adds,
    failAdds,
    before,
    /** The epoch the shared side reports (null: none read yet). */
    epoch: (e: string | null) => (extra.currentEpoch = e),
    inner: () => inner,
    /** The shared state emptied (a restart without persistence, FLUSHALL). */
    empty: () => {
      inner = new MemoryFleetStore();
    },
  };
}

async function setup(clock = new VirtualClock()) {
  const sh = fakeShared();
  const s = new FailoverFleetStore(sh.store, silentLogger, { probeMs: PROBE, logEveryMs: 60_000 }, clock);
  await s.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
  await s.applySnapshot(U, snapshotWithA(1));
  /** Cuts the shared store off and makes a decision notice it. */
  const cut = async () => {
    sh.down.value = true;
    await s.views([U]);
    expect(s.mode()).toBe('local');
  };
  /** Brings it back and lets the next probe run. */
  const back = async () => {
    sh.down.value = false;
    await clock.run(clock.now() + PROBE);
  };
  return { clock, sh, s, cut, back };
}

const sharedInFlight = async (store: MemoryFleetStore) => (await store.views([U], { name: 'a' }))[0];

describe('FailoverFleetStore.recover', () => {
  it('registers the replicas again, moves the local leases there and shares again', async () => {
    const { sh, s, cut, back } = await setup();
    await cut();
    sh.empty(); // came back empty
    await s.acquire(lease('L1'));
    await s.acquire(lease('L2'));
    expect(await s.local.inFlightTotal()).toBe(2);
    await back();
    expect(s.mode()).toBe('redis');
    expect(await sh.inner().replicaSpecs()).toEqual([{ url: U, backend: 'vllm', priority: 0 }]);
    expect(await sh.inner().inFlightTotal()).toBe(2);
    // Moved, not copied: the local store counts them no more.
    expect(await s.local.inFlightTotal()).toBe(0);
    // Each is released in the shared store, where it now counts.
    await s.release('L1', 5, 200);
    await s.release('L2', 5, 200);
    expect(await sh.inner().inFlightTotal()).toBe(0);
  });

  it('hands on the replicas it polled up while deciding alone: the shared store held a down from before (dst seed 503368)', async () => {
    const { sh, s, cut, back } = await setup();
    await sh.inner().applySnapshot(U, { at: 2, startedAt: 2, ok: false, error: 'connect' });
    await cut();
    await s.applySnapshot(U, snapshotWithA(3));
    await back();
    expect(s.mode()).toBe('redis');
    expect((await sh.inner().views([U]))[0]!.health).toBe('up');
  });

  it('replays a release of a shared lease made while deciding alone', async () => {
    const { sh, s, cut, back } = await setup();
    expect(await s.acquire(lease('S1'))).toBe('loaded');
    await cut();
    expect(await s.release('S1', 3, 200)).toMatchObject({ id: 'S1', adapterIdle: true });
    expect(await sh.inner().inFlightTotal()).toBe(1);
    await back();
    expect(s.mode()).toBe('redis');
    expect(await sh.inner().inFlightTotal()).toBe(0);
    expect((await sharedInFlight(sh.inner()))!.inFlight).toBe(0);
  });

  it('sends again the end of a load lock begun there, and prunes with the leases it holds', async () => {
    const { sh, s, cut, back } = await setup();
    const fence = await s.beginLoad(U, 'b', 2, 4, 60_000);
    expect(fence).toBeGreaterThan(0);
    await s.acquire(lease('S1'));
    await cut();
    // Ended while the shared store is away: the shared lock stays until it is told.
    expect(await s.finishLoad(U, 'b', fence!, true, 3)).toBe(false);
    expect(await sh.inner().holds(U, 'b', fence!)).toBe(true);
    sh.prunes.length = 0;
    await back();
    expect(s.mode()).toBe('redis');
    expect(await sh.inner().holds(U, 'b', fence!)).toBe(false);
    expect(sh.prunes).toEqual([['S1']]);
  });

  it('stays deciding alone while the shared store refuses part of the hand-back, and tries again', async () => {
    const { sh, s, cut, back, clock } = await setup();
    await cut();
    await s.acquire(lease('L1'));
    // Answers the probe's ping, then fails the hand-back's first call.
    const upsert = sh.inner().upsertReplica.bind(sh.inner());
    let failures = 1;
    sh.inner().upsertReplica = async (spec) => {
      if (failures-- > 0) throw new Error('timeout');
      return upsert(spec);
    };
    await back();
    expect(s.mode()).toBe('local');
    expect(await sh.inner().inFlightTotal()).toBe(0);
    await clock.run(clock.now() + PROBE);
    expect(s.mode()).toBe('redis');
    expect(await sh.inner().inFlightTotal()).toBe(1);
  });

  it('admissions that outrun the walk keep it deciding alone until a probe finds none', async () => {
    const { sh, s, cut, back, clock } = await setup();
    await cut();
    await s.acquire(lease('L0'));
    // Every retake of local leases (one call a pass) admits another one, and answers after the
    // longest an admission waits for the recovery's end (`recoveryWaitMs`, here `probeMs`): each
    // is decided alone then (still degraded), and the pass after has it to hand back. Only in the
    // first probe's recovery (one ping so far).
    let admitted = 0;
    const retake = sh.inner().retake.bind(sh.inner());
    sh.inner().retake = async (ls) => {
      if (sh.calls.filter((c) => c === 'ping').length === 1) void s.acquire(lease(`N${++admitted}`));
      await sleep(clock, PROBE + 1);
      return retake(ls);
    };
    await back(); // the probe: its recovery begins
    await clock.run(clock.now() + 101 * (PROBE + 1)); // 101 retakes: its end
    expect(s.mode()).toBe('local');
    // Bounded: one pass before the loop and at most 100 in it.
    expect(admitted).toBe(101);
    await clock.run(clock.now() + PROBE + 2 * (PROBE + 1)); // the next probe: two retakes
    expect(s.mode()).toBe('redis');
    expect(await sh.inner().inFlightTotal()).toBe(admitted + 1);
    expect(await s.local.inFlightTotal()).toBe(0);
  });
});

describe('FailoverFleetStore after an emptied state', () => {
  it('a decision that finds it emptied registers the replicas and re-takes the leases, once', async () => {
    const { sh, s } = await setup();
    await s.acquire(lease('S1'));
    sh.empty();
    sh.lost.value = true;
    sh.prunes.length = 0;
    const views = await s.views([U], { name: 'a' });
    expect(views.map((v) => v.url)).toEqual([U]);
    expect(await sh.inner().replicaSpecs()).toEqual([{ url: U, backend: 'vllm', priority: 0 }]);
    expect(await sh.inner().inFlightTotal()).toBe(1);
    expect(sh.prunes).toEqual([['S1']]);
    // Not lost again: nothing more is taken.
    await s.views([U], { name: 'a' });
    expect(sh.prunes).toHaveLength(1);
  });

  it('a reclaim hands on the replicas polled down, not those polled up: no down of the emptied state to undo', async () => {
    // dst seeds 5273 and 322 ran otherwise once every reclaim sent an up verdict per replica (seed 503368's).
    const { sh, s } = await setup();
    const D = 'http://10.0.0.2:8000';
    await s.upsertReplica({ url: D, backend: 'vllm', priority: 0 });
    await s.applySnapshot(D, { at: 2, ok: false, error: 'connect' });
    sh.empty();
    sh.lost.value = true;
    sh.calls.length = 0;
    await s.views([U, D]);
    expect(sh.calls.filter((c) => c === 'applySnapshot')).toHaveLength(1);
    expect((await sh.inner().views([U, D])).map((v) => v.health)).toEqual(['unknown', 'down']);
  });

  it('a decision that finds its replicas unknown there (not emptied) registers them and reads again', async () => {
    const { sh, s } = await setup();
    await s.acquire(lease('S1'));
    sh.empty(); // as a peer saw it: the epoch unchanged, the replicas gone
    expect((await s.views([U], { name: 'a' })).map((v) => v.url)).toEqual([U]);
    expect(await sh.inner().inFlightTotal()).toBe(1);
  });

  it('a store replaced on the same state prunes nothing: its successor prunes for both', async () => {
    const { sh, s, clock } = await setup();
    const next = new FailoverFleetStore(
      sh.store,
      silentLogger,
      { probeMs: PROBE, logEveryMs: 60_000 },
      clock,
    );
    await s.acquire(lease('S1'));
    await next.succeed(s);
    expect(sh.prunes.at(-1)).toEqual(['S1']);
    sh.prunes.length = 0;
    sh.empty();
    sh.lost.value = true;
    await s.views([U], { name: 'a' });
    expect(await sh.inner().inFlightTotal()).toBe(1);
    expect(sh.prunes).toEqual([]);
  });

  // dst seed 311722: a record change on the same state left a request on its way on the retired
  // runtime's lease; Redis lost it in a lossy switch, and the successor's recovery took only its
  // own leases again, so another node unloaded the adapter under the request.
  it("a successor takes its predecessor's leases again too, recovering or told of an emptied state", async () => {
    for (const how of ['recovery', 'heartbeat'] as const) {
      const { sh, s, clock } = await setup();
      await s.acquire(lease('P1'));
      const next = new FailoverFleetStore(
        sh.store,
        silentLogger,
        { probeMs: PROBE, logEveryMs: 60_000 },
        clock,
      );
      await next.succeed(s);
      if (how === 'recovery') {
        sh.down.value = true;
        await next.views([U]);
        expect(next.mode()).toBe('local');
        sh.empty();
        sh.down.value = false;
        await clock.run(clock.now() + PROBE);
        expect(next.mode()).toBe('redis');
      } else {
        sh.empty();
        await next.upsertReplica({ url: U, backend: 'vllm', priority: 0 });
        sh.store.onStateLost!();
        await new Promise((r) => setImmediate(r));
      }
      expect([how, await sh.inner().inFlightTotal()]).toEqual([how, 1]);
      // Released through the predecessor, as its request ends: counted nowhere after.
      await s.release('P1', clock.now(), 200);
      expect([how, await sh.inner().inFlightTotal()]).toEqual([how, 0]);
      await s.close();
      await next.close();
    }
  });

  it('emptied a second time, it is taken again the second time too', async () => {
    const { sh, s } = await setup();
    await s.acquire(lease('S1'));
    for (let i = 0; i < 2; i++) {
      sh.empty();
      sh.lost.value = true;
      expect((await s.views([U], { name: 'a' })).map((v) => v.url)).toEqual([U]);
      expect(await sh.inner().inFlightTotal()).toBe(1);
    }
  });

  it('a heartbeat whose re-take fails leaves the node deciding alone', async () => {
    const { sh, s } = await setup();
    await s.acquire(lease('S1'));
    sh.down.value = true;
    sh.store.onStateLost!();
    await new Promise((r) => setImmediate(r));
    expect(s.mode()).toBe('local');
    await s.close();
  });

  it('a heartbeat that finds it emptied re-takes the leases too, unless deciding alone', async () => {
    const { sh, s, cut } = await setup();
    await s.acquire(lease('S1'));
    sh.empty();
    await s.upsertReplica({ url: U, backend: 'vllm', priority: 0 }); // another node registered it
    sh.store.onStateLost!();
    await new Promise((r) => setImmediate(r));
    expect(await sh.inner().inFlightTotal()).toBe(1);
    await cut();
    sh.empty();
    sh.down.value = false;
    sh.store.onStateLost!();
    await new Promise((r) => setImmediate(r));
    expect(await sh.inner().inFlightTotal()).toBe(0);
  });
});

// The run of recovering-store.ts (docs/reliability/mutation-testing.md): a registration emptied
// once mid-way, a reclaim told of a second emptying, and a predecessor's outage holding unloads off.
describe('RecoveringFleetStore: registration passes, a reclaim told again, a predecessor alone', () => {
  const U2 = 'http://10.0.0.2:8000';

  it('a registration the state was emptied under once is done again at once: the node keeps sharing', async () => {
    const { sh, s } = await setup();
    await s.upsertReplica({ url: U2, backend: 'vllm', priority: 0 });
    await s.acquire(lease('S1'));
    let writes = 0;
    sh.empty();
    sh.lost.value = true;
    // Between the first write and the second, the state is emptied again (a new epoch).
    sh.before.upsertReplica = () => {
      if (++writes !== 2) return;
      sh.empty();
      sh.epoch('e2');
    };
    expect(await s.views([U, U2])).toHaveLength(2);
    expect(s.mode()).toBe('redis');
    expect((await sh.inner().replicaSpecs()).map((r) => r.url).sort()).toEqual([U, U2]);
    expect(await sh.inner().inFlightTotal()).toBe(1);
  });

  it('a reclaim told of another emptying after its registration registers and takes the leases again', async () => {
    const { sh, s } = await setup();
    await s.acquire(lease('S1'));
    let prunes = 0;
    sh.empty();
    sh.lost.value = true;
    // A heartbeat's reply, once the leases were taken again: emptied a second time.
    sh.before.prune = () => {
      if (++prunes !== 1) return;
      sh.empty();
      sh.store.onStateLost!();
    };
    await s.views([U], { name: 'a' });
    expect(await sh.inner().replicaSpecs()).toEqual([{ url: U, backend: 'vllm', priority: 0 }]);
    expect(await sh.inner().inFlightTotal()).toBe(1);
  });

  it("a successor holds unloads off while its predecessor decides alone and for that one's hold-off, not after, nor once it closed", async () => {
    const { clock, sh, s, cut, back } = await setup();
    const next = new FailoverFleetStore(
      sh.store,
      silentLogger,
      { probeMs: PROBE, logEveryMs: 60_000 },
      clock,
    );
    await next.succeed(s);
    await clock.run(clock.now() + 3 * PROBE); // past any hold-off of its own start
    expect(next.unloadsHeldOff()).toBe(false);
    await cut(); // the predecessor alone; the successor shares
    expect(next.mode()).toBe('redis');
    expect(s.unloadsHeldOff()).toBe(false);
    expect(next.unloadsHeldOff()).toBe(true);
    await back();
    expect(s.mode()).toBe('redis');
    expect(next.unloadsHeldOff()).toBe(true); // the predecessor's hold-off after its outage
    await clock.run(clock.now() + 2 * PROBE);
    expect(next.unloadsHeldOff()).toBe(false);
    await cut();
    await s.close();
    expect(next.unloadsHeldOff()).toBe(false);
    await next.close();
  });

  it('a release decided alone during the recovery walk is sent in its last pass, not left counted there', async () => {
    const { sh, s, cut, back } = await setup();
    await s.acquire(lease('S1'));
    await cut();
    // The request ends while the recovery hands back the rest: still decided alone.
    sh.before.prune = () => {
      sh.before.prune = undefined;
      void s.release('S1', 3, 200);
    };
    await back();
    expect(s.mode()).toBe('redis');
    expect(await sh.inner().inFlightTotal()).toBe(0);
  });

  it("a successor on the same state deciding alone counts the cold loads its predecessor granted alone: the node's one share", async () => {
    const { clock, sh, s, cut } = await setup();
    const next = new FailoverFleetStore(
      sh.store,
      silentLogger,
      { probeMs: PROBE, logEveryMs: 60_000 },
      clock,
    );
    await next.succeed(s);
    await cut();
    await next.views([U]);
    expect(next.mode()).toBe('local');
    // 3 nodes, a limit of 3: a share of 1 a window for the node, whichever of its stores grants it.
    expect(await s.spendBudget('fleet', 3, 60_000, clock.now())).toBe(0);
    expect(await next.spendBudget('fleet', 3, 60_000, clock.now())).toBeGreaterThan(0);
    await s.close();
    await next.close();
  });
});

describe('FailoverFleetStore: leases decided alone, leaving, successors', () => {
  const another = (sh: ReturnType<typeof fakeShared>, clock: VirtualClock) =>
    new FailoverFleetStore(sh.store, silentLogger, { probeMs: PROBE, logEveryMs: 60_000 }, clock);

  it('a lease whose shared acquire failed is released there too once back: the acquire may have run', async () => {
    const { sh, s, back } = await setup();
    await sh.inner().acquire(lease('T1')); // ran there, then timed out here
    sh.down.value = true;
    await s.acquire(lease('T1'));
    expect(s.mode()).toBe('local');
    expect(await s.local.inFlightTotal()).toBe(1);
    await s.release('T1', 3, 200);
    expect(await s.local.inFlightTotal()).toBe(0);
    await back();
    expect(s.mode()).toBe('redis');
    expect(await sh.inner().inFlightTotal()).toBe(0);
  });

  it("a shared lease's release tells the local store the upstream's answer; none, nothing", async () => {
    const { s } = await setup();
    const health = async () => (await s.local.views([U]))[0]!.health;
    for (let i = 0; i < PASSIVE_FAILURE_LIMIT; i++) {
      await s.acquire(lease(`N${i}`));
      await s.release(`N${i}`, 3);
    }
    expect(await health()).toBe('up');
    // An id this node never leased: nothing to observe, no error.
    expect(await s.release('unknown', 3, 503)).toBeUndefined();
    for (let i = 0; i < PASSIVE_FAILURE_LIMIT; i++) {
      await s.acquire(lease(`F${i}`));
      await s.release(`F${i}`, 3, 503);
    }
    expect(await health()).toBe('down');
  });

  it('deciding alone, the lease sweep finds nothing shared to expire', async () => {
    const { s, cut } = await setup();
    await cut();
    expect(await s.expireLeases(10, 60_000)).toEqual([]);
  });

  it('leaving replays the releases made alone, prunes as a leaver, and stops', async () => {
    const { sh, s, cut } = await setup();
    await s.acquire(lease('S1'));
    await cut();
    await s.release('S1', 3, 200);
    sh.down.value = false;
    sh.prunes.length = 0;
    await s.leave(10 * PROBE);
    expect(await sh.inner().inFlightTotal()).toBe(0);
    expect(sh.prunes).toEqual([[]]);
    expect(sh.leaving).toEqual([true]);
  });

  it('leaving an unreachable state tries at every probe, and is done once it answers', async () => {
    const { clock, sh, s, cut } = await setup();
    await s.acquire(lease('S1'));
    await cut();
    await s.release('S1', 3, 200);
    let done = false;
    const left = s.leave(5 * PROBE).then(() => (done = true));
    await clock.run(clock.now() + PROBE);
    expect(done).toBe(false);
    sh.down.value = false;
    await clock.run(clock.now() + PROBE);
    await left;
    expect(await sh.inner().inFlightTotal()).toBe(0);
    expect(sh.leaving).toEqual([true]);
  });

  it('leaving a state that never answers gives up at maxMs, not a probe later', async () => {
    const { clock, sh, s, cut } = await setup();
    await cut();
    let done = false;
    void s.leave(3 * PROBE).then(() => (done = true));
    await clock.run(clock.now() + 3 * PROBE);
    expect(done).toBe(true);
    // At 0, 1, 2 and 3 probe intervals.
    expect(sh.calls.filter((c) => c === 'ping')).toHaveLength(4);
  });

  // The run of failover-store.ts's lock-end lines (docs/reliability/mutation-testing.md): a store
  // leaving for other state waits for its same-state predecessor to hand it what it owes there.
  it('leaving waits for a predecessor on its state to be adopted, and goes on at once when it is (seed 556526)', async () => {
    const { clock, sh, s } = await setup();
    const next = another(sh, clock);
    await next.succeed(s);
    let left = false;
    const leaving = next.leave(10 * PROBE).then(() => (left = true));
    await clock.run(clock.now() + 3 * PROBE);
    expect(left).toBe(false);
    await next.adopt(s);
    await new Promise((r) => setImmediate(r));
    expect(left).toBe(true);
    await leaving;
    await s.close();
  });

  it('a successor whose prune fails decides alone', async () => {
    const { clock, sh, s } = await setup();
    const next = another(sh, clock);
    sh.down.value = true;
    await next.succeed(s);
    expect(next.mode()).toBe('local');
    sh.down.value = false;
    await s.close();
    await next.close();
  });

  it('adopting a predecessor replays its releases made alone, and degrades if that fails', async () => {
    for (const fails of [false, true]) {
      const { clock, sh, s, cut } = await setup();
      await s.acquire(lease('S1'));
      await cut();
      await s.release('S1', 3, 200);
      sh.down.value = false;
      const next = another(sh, clock);
      await next.succeed(s);
      sh.down.value = fails;
      await next.adopt(s);
      expect(next.mode()).toBe(fails ? 'local' : 'redis');
      sh.down.value = false;
      expect(await sh.inner().inFlightTotal()).toBe(fails ? 1 : 0);
      await s.close();
      await next.close();
    }
  });

  it('adopting a predecessor sends the end of a load it ended alone: the adapter is not left loading (dst seed 662665)', async () => {
    const { clock, sh, s, cut } = await setup();
    const fence = await s.beginLoad(U, 'bio', 2, 2, 8_000);
    expect(fence).toBeGreaterThan(0);
    const next = another(sh, clock);
    await next.succeed(s);
    await cut(); // the old runtime alone (a switch told to its link), its load failing meanwhile
    expect(await s.finishLoad(U, 'bio', fence!, false, 3)).toBe(false);
    sh.down.value = false;
    await next.adopt(s); // it drained and closes: its probe never runs again
    await s.close();
    expect((await sh.inner().residents(U)).map((a) => `${a.name}:${a.state}`)).toEqual(['a:loaded']);
    await next.close();
  });

  it('a record change received holds unloads off until the old runtime is done', async () => {
    const { clock, s } = await setup();
    let decided!: () => void;
    const receiving = s.receiving(new Promise<void>((r) => (decided = r)));
    expect(s.unloadsHeldOff()).toBe(true);
    decided();
    await receiving;
    await clock.run(clock.now() + 2 * PROBE);
    expect(s.unloadsHeldOff()).toBe(false);
  });

  it('sends again the end of an unload lock begun there', async () => {
    const { sh, s, cut, back } = await setup();
    const fence = await s.beginUnload(U, 'a', 2, 60_000);
    expect(fence).toBeGreaterThan(0);
    await cut();
    expect(await s.finishUnload(U, 'a', fence!, true, 3)).toBe(false);
    expect(await sh.inner().holds(U, 'a', fence!)).toBe(true);
    await back();
    expect(await sh.inner().holds(U, 'a', fence!)).toBe(false);
  });

  it('views and a lease in one round trip: shared, taken again after an emptied state, or alone', async () => {
    const { sh, s, back } = await setup();
    const r = await s.viewsAndLease([U], { name: 'a' }, lease('V1'));
    expect(r.views.map((v) => v.url)).toEqual([U]);
    expect(r.state).toBe('loaded');
    expect(await sh.inner().inFlightTotal()).toBe(1);
    expect(await s.local.inFlightTotal()).toBe(0);
    expect(sh.prunes).toEqual([]); // nothing found emptied: nothing taken again
    // Emptied, and the replica registered again by a peer first: this node's lease taken again too.
    sh.empty();
    await sh.inner().upsertReplica({ url: U, backend: 'vllm', priority: 0 });
    sh.lost.value = true;
    const again = await s.viewsAndLease([U], { name: 'a' }, lease('V2'));
    expect(again.views.map((v) => v.url)).toEqual([U]);
    expect((await sh.inner().views([U], { name: 'a' }))[0]!.inFlight).toBe(2);
    // Its replicas unknown there, not seen emptied: registered again and read again.
    sh.empty();
    const unknown = await s.viewsAndLease([U], { name: 'a' }, lease('V4'));
    expect(unknown.views.map((v) => v.url)).toEqual([U]);
    for (const id of ['V1', 'V2', 'V4']) await s.release(id, 3, 200);
    expect(await sh.inner().inFlightTotal()).toBe(0);
    // A round trip that timed out after it ran there: decided alone, then released there too once back.
    await sh.inner().acquire(lease('V3'));
    sh.down.value = true;
    const alone = await s.viewsAndLease([U], { name: 'a' }, lease('V3'));
    expect(s.mode()).toBe('local');
    expect(alone.views.map((v) => v.url)).toEqual([U]);
    expect(await s.local.inFlightTotal()).toBe(1);
    await s.release('V3', 4, 200);
    expect(await s.local.inFlightTotal()).toBe(0);
    await back();
    expect(await sh.inner().inFlightTotal()).toBe(0);
  });

  it('a lease given back is no longer kept by the prune, however it was taken', async () => {
    const { sh, s } = await setup();
    await s.acquire(lease('A1'));
    await s.viewsAndLease([U], { name: 'a' }, lease('A2'));
    await s.release('A1', 3, 200);
    await s.release('A2', 3, 200);
    sh.prunes.length = 0;
    sh.empty();
    sh.lost.value = true;
    await s.views([U], { name: 'a' });
    // A restored snapshot may bring A1 or A2 back there: the prune must drop them.
    expect(sh.prunes).toEqual([[]]);
  });

  it('adopting takes the predecessor out of the chain, wherever it is in it', async () => {
    const { clock, sh, s: z } = await setup();
    const [a, b, c] = [another(sh, clock), another(sh, clock), another(sh, clock)];
    await a.succeed(z);
    await b.succeed(a);
    await c.succeed(b);
    await c.adopt(a);
    expect(c.predecessor).toBe(b);
    expect(b.predecessor).toBe(z);
    await c.adopt(b);
    expect(c.predecessor).toBe(z);
    for (const x of [z, a, b, c]) await x.close();
  });
});

describe("FailoverFleetStore: the node's cold-load spends, shared, alone and carried", () => {
  const LIMIT = 6; // over the fake's 3 nodes: a share of 2 alone
  const W = 60_000;
  const spend = (s: FailoverFleetStore, clock: VirtualClock) => s.spendBudget('fleet', LIMIT, W, clock.now());
  /** Cold loads the shared window granted other nodes. */
  const othersSpent = async (sh: ReturnType<typeof fakeShared>, n: number) => {
    for (let i = 0; i < n; i++) await sh.inner().spendBudget('fleet', LIMIT, W, 0);
  };

  it('a cold load the shared window granted counts in the share it grants alone; a refusal there does not', async () => {
    // Granted 2 there (the others spent 4), refused the third: its share alone is spent.
    const spentThere = await setup();
    await othersSpent(spentThere.sh, 4);
    const there: number[] = [];
    for (let i = 0; i < 3; i++) there.push(await spend(spentThere.s, spentThere.clock));
    expect(there.map((w) => w === 0)).toEqual([true, true, false]);
    await spentThere.cut();
    expect(await spend(spentThere.s, spentThere.clock)).toBeGreaterThan(0);
    // Refused there twice (the others spent the window): its whole share alone, then nothing.
    const refused = await setup();
    await othersSpent(refused.sh, LIMIT);
    expect(await spend(refused.s, refused.clock)).toBeGreaterThan(0);
    expect(await spend(refused.s, refused.clock)).toBeGreaterThan(0);
    await refused.cut();
    const alone: number[] = [];
    for (let i = 0; i < 3; i++) alone.push(await spend(refused.s, refused.clock));
    expect(alone.map((w) => w === 0)).toEqual([true, true, false]);
  });

  it('a store on other state counts what the node spent, and what the old stores still grant, down the chain', async () => {
    const clock = new VirtualClock();
    const [a, b, c] = [await setup(clock), await setup(clock), await setup(clock)];
    expect([await spend(a.s, clock), await spend(a.s, clock)]).toEqual([0, 0]);
    await b.s.carrySpends(a.s, Promise.resolve());
    expect(b.sh.adds).toEqual([['fleet', 2]]);
    // A decision still under way on the old store, granted there: counted on the new state too.
    expect(await spend(a.s, clock)).toBe(0);
    expect(b.sh.adds).toEqual([
      ['fleet', 2],
      ['fleet', 1],
    ]);
    // A refusal there is no spend: nothing is carried for it.
    await othersSpent(a.sh, LIMIT);
    expect(await spend(a.s, clock)).toBeGreaterThan(0);
    expect(b.sh.adds).toHaveLength(2);
    // Changed again: the newest state counts all three, and what the oldest store grants goes to it.
    await c.s.carrySpends(b.s, Promise.resolve());
    expect(c.sh.adds).toEqual([['fleet', 3]]);
    a.sh.empty(); // a fresh window there, so the old store grants again
    expect(await spend(a.s, clock)).toBe(0);
    expect(c.sh.adds).toEqual([
      ['fleet', 3],
      ['fleet', 1],
    ]);
    expect(b.sh.adds).toHaveLength(2);
    for (const x of [a, b, c]) await x.s.close();
  });

  it('a carry to a store deciding alone sends nothing while it does; a carry the new state refuses degrades it', async () => {
    const clock = new VirtualClock();
    const [a, b] = [await setup(clock), await setup(clock)];
    expect(await spend(a.s, clock)).toBe(0);
    await b.cut();
    b.sh.calls.length = 0;
    await b.s.carrySpends(a.s, Promise.resolve());
    // A grant on the old store waits for the carry: never on a store known down (a command timeout).
    expect(await spend(a.s, clock)).toBe(0);
    expect(b.sh.calls).not.toContain('addToBudget');
    // Alone, the new store counts both: the share (2) is spent.
    expect(await spend(b.s, clock)).toBeGreaterThan(0);
    // The new state answers the registration, then loses the add: it decides alone until a probe.
    const [c, d] = [await setup(clock), await setup(clock)];
    expect(await spend(c.s, clock)).toBe(0);
    d.sh.failAdds.value = 1;
    await d.s.carrySpends(c.s, Promise.resolve());
    expect(d.s.mode()).toBe('local');
    for (const x of [a, b, c, d]) await x.s.close();
  });

  it('what a store deciding alone was carried is added to the new state once a probe finds it', async () => {
    const clock = new VirtualClock();
    const [a, b] = [await setup(clock), await setup(clock)];
    expect(await spend(a.s, clock)).toBe(0);
    await b.cut(); // the record change's registration reached only the local store
    await b.s.carrySpends(a.s, Promise.resolve());
    expect(await spend(a.s, clock)).toBe(0);
    await b.back();
    expect(b.s.mode()).toBe('redis');
    expect(b.sh.adds).toEqual([['fleet', 2]]);
    // Counted there once: the next recovery adds nothing more.
    await b.cut();
    await b.back();
    expect(b.s.mode()).toBe('redis');
    expect(b.sh.adds).toEqual([['fleet', 2]]);
    for (const x of [a, b]) await x.s.close();
  });

  it('a recovery that read no epoch leaves the carried spends for one that does, and adds them once', async () => {
    const clock = new VirtualClock();
    const [a, b] = [await setup(clock), await setup(clock)];
    expect(await spend(a.s, clock)).toBe(0);
    await b.cut();
    await b.s.carrySpends(a.s, Promise.resolve());
    b.sh.epoch(null);
    await b.back();
    expect(b.sh.adds).toEqual([]);
    b.sh.epoch('e1');
    await b.cut();
    await b.back();
    expect(b.sh.adds).toEqual([['fleet', 1]]);
    for (const x of [a, b]) await x.s.close();
  });
});

describe('cold loads granted alone are added to the shared window once on recovery', () => {
  const LIMIT = 6;
  const W = 60_000;
  const spend = (s: FailoverFleetStore, clock: VirtualClock) => s.spendBudget('fleet', LIMIT, W, clock.now());
  const added = (adds: [string, number][]) => adds.reduce((n, [, c]) => n + c, 0);

  // A runtime replaced on the same state during an outage has read no epoch: its grants alone were
  // dated none, and recovery's republish added them besides merge ([["fleet",1],["fleet",1]]).
  it('by a store that read no epoch before it decided alone', async () => {
    const { sh, s, cut, back, clock } = await setup();
    await cut();
    sh.epoch(null);
    expect(await spend(s, clock)).toBe(0);
    sh.epoch('e1');
    await back();
    expect(s.mode()).toBe('redis');
    expect(added(sh.adds)).toBe(1);
    await s.close();
  });

  // Redis restarted empty during the outage: merge adds the grants to the new state; neither the
  // recovery's republish nor a later one for the emptied state adds them again.
  it('when the state came back emptied', async () => {
    const { sh, s, cut, back, clock } = await setup();
    await cut();
    expect(await spend(s, clock)).toBe(0);
    expect(await spend(s, clock)).toBe(0);
    sh.empty();
    sh.epoch('e2');
    await back();
    expect(s.mode()).toBe('redis');
    expect(added(sh.adds)).toBe(2);
    await s.views([U]);
    expect(added(sh.adds)).toBe(2);
    await s.close();
  });
});

describe('FailoverFleetStore.succeed', () => {
  // dst seed 3044962: a stale worker's configuration, registered on the predecessor only, decided
  // alone on the successor after a same-state `redis` record change, read none of its own replicas
  // but the one the new configuration listed, and the health filter failed open onto it.
  it("the successor's local copy knows the replicas its predecessor's did, a newer registration's spec kept", async () => {
    const { sh, s, clock, cut } = await setup();
    const V = 'http://10.0.0.2:8000';
    const W = 'http://10.0.0.3:8000';
    await s.upsertReplica({ url: W, backend: 'vllm', priority: 0 });
    const next = new FailoverFleetStore(
      sh.store,
      silentLogger,
      { probeMs: PROBE, logEveryMs: 60_000 },
      clock,
    );
    await next.upsertReplica({ url: V, backend: 'vllm', priority: 0 });
    await next.upsertReplica({ url: U, backend: 'vllm', priority: 1 });
    await cut();
    await next.succeed(s);
    expect(next.mode()).toBe('local');
    expect((await next.views([U, V, W])).map((v) => v.url)).toEqual([U, V, W]);
    expect((await next.local.replicaSpecs()).find((r) => r.url === U)?.priority).toBe(1);
  });
});
