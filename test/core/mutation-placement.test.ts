/**
 * Unit test of Placement (src/router/placement.ts, one module), written against the survivors of
 * `npm run mutation:safety -- placement` (docs/reliability/mutation-testing.md): where a cold
 * adapter goes when another node placed it first, on a replica seen down, or saturated; how many
 * times a decision is taken again; and that a decision's claim and placement end with it. The
 * runtime is real (an in-process store on a virtual clock); the replicas' views are the test's own,
 * so each decision sees exactly what is written here, and `admit` is the test's too.
 */
import type { Resolved } from '../../src/adapters/catalog';
import { PlacedElsewhere } from '../../src/adapters/claims';
import { EVICTION_POLICIES } from '../../src/adapters/eviction';
import { VirtualClock } from '../../src/clock';
import { parseRouterConfig } from '../../src/config/parse';
import { errors, RouterError } from '../../src/errors';
import type { ReplicaView } from '../../src/fleet/types';
import { silentLogger } from '../../src/log';
import { ROOM_FALLBACK_MS } from '../../src/adapters/room';
import { Placement, SeenDown } from '../../src/router/placement';
import { schedulingPolicy } from '../../src/router/registration';
import { RoomWait } from '../../src/router/room-wait';
import { FleetRuntime } from '../../src/runtime';
import { pipelineFor, SchedulingPipeline } from '../../src/scheduler/pipeline';
import type { Decision, SchedulingContext } from '../../src/scheduler/types';
import { view } from './helpers';

const R1 = 'http://r1:8000';
const R2 = 'http://r2:8000';
const T0 = 100_000;
const X: Resolved = { kind: 'on-demand', adapter: { name: 'x', path: '/adapters/x' }, discovered: false };

/** Fresh views of the test's replicas at the clock's time; `over` per URL. */
type World = Record<string, Partial<ReplicaView>>;

async function setup(world: World, extra: Record<string, unknown> = {}) {
  const clock = new VirtualClock();
  await clock.run(T0);
  const rt = new FleetRuntime({ log: silentLogger, clock, seed: 1 });
  const urls = Object.keys(world);
  const config = parseRouterConfig({
    replicas: urls.map((url) => ({ url })),
    base_model: 'base',
    adapter_path_template: '/adapters/{name}',
    max_loaded_adapters: 2,
    ...extra,
  });
  const placement = new Placement({
    pipeline: new SchedulingPipeline(pipelineFor(config)),
    roomPipeline: new SchedulingPipeline(pipelineFor({ ...config, room_wait: 'anywhere' })),
    urls,
    config,
    eviction: EVICTION_POLICIES[config.eviction]!,
    isStatic: () => false,
    weighsVictims: config.room_wait !== 'replica' || config.eviction !== 'lru',
  });
  const views = (): ReplicaView[] =>
    urls.map((url) =>
      view(url, { snapshotAt: clock.now(), checkedAt: clock.now(), ...structuredClone(world[url]) }),
    );
  // The views every later read of the store gives: the test's world as it is then.
  /** Each later read: whether it asked for the replicas' residents. */
  const reads: boolean[] = [];
  rt.store.views = async (_urls, _adapter, residents) => {
    reads.push(residents === true);
    return views();
  };
  /** Placement claims this node sent, as `adapter@url[ seen]`. */
  const claims: string[] = [];
  const ttls: number[] = [];
  const claimPlacement = rt.store.claimPlacement.bind(rt.store);
  rt.store.claimPlacement = (adapter, url, seen, at, ttl) => {
    claims.push(`${adapter}@${url}${seen ? ` seen ${seen}` : ''}`);
    ttls.push(ttl);
    return claimPlacement(adapter, url, seen, at, ttl);
  };
  const released: string[] = [];
  const releasePlacement = rt.store.releasePlacement.bind(rt.store);
  rt.store.releasePlacement = (adapter, url) => {
    released.push(`${adapter}@${url}`);
    return releasePlacement(adapter, url);
  };
  /** Places one request for `x`; each decision `admit` is given is recorded. */
  const place = async <T>(
    admit: (d: Decision, queueMs: number, recheck?: () => Promise<string>) => Promise<T>,
    o: {
      resolved?: Resolved;
      wait?: RoomWait;
      ctx?: SchedulingContext;
      contextTokens?: number;
    } = {},
  ) => {
    const resolved = o.resolved ?? X;
    const wait = o.wait ?? new RoomWait(config, clock.now());
    const ctx = o.ctx ?? { now: clock.now(), policy: schedulingPolicy(config), random: rt.random };
    const adapter = resolved.kind === 'base' ? undefined : resolved.adapter;
    return placement.place(
      rt,
      { resolved, adapter, ctx, views: views(), wait, contextTokens: o.contextTokens },
      admit,
    );
  };
  /** Runs the clock until `p` settles: its value or error. */
  const settle = async <T>(p: Promise<T>) => {
    const s = p.then(
      (v) => ({ v, err: undefined }),
      (err: unknown) => ({ v: undefined, err }),
    );
    await clock.run();
    return s;
  };
  /** Another node places `x` on `url` (not in this node's claim log). */
  const placedBy = (url: string) => claimPlacement('x', url, undefined, T0, 60_000);
  /** Places one request for `x`, admitted wherever it is decided: the outcome, and where it was admitted. */
  const placeAnywhere = async () => {
    const went: string[] = [];
    const r = await settle(place(async (d) => (went.push(d.replica.url), d.replica.url)));
    return { r, went };
  };
  return {
    clock,
    rt,
    config,
    place,
    settle,
    placedBy,
    placeAnywhere,
    claims,
    ttls,
    released,
    reads,
    world,
    views,
  };
}

/** Whether this process still shows a claim of `x` on any replica (an unclaimed decision shows none). */
function claimedHere(rt: FleetRuntime, urls: string[]): string[] {
  const vs = urls.map((url) => view(url));
  rt.manager.overlayClaims(vs, 'x');
  return vs.filter((v) => v.adapter?.claimed).map((v) => v.url);
}

describe('Placement: another node placed the cold adapter first', () => {
  it('follows it with fresh views, admits there with its claim checked again on a wait, and ends the claim', async () => {
    const s = await setup({ [R1]: {}, [R2]: {} });
    const { rt } = s;
    // Another node placed `x` on R2 (nobody loads it there yet).
    await s.placedBy(R2);
    s.ttls.length = 0;
    const went: string[] = [];
    let recheck: (() => Promise<string>) | undefined;
    const r = await s.settle(
      s.place(async (d, _q, again) => {
        went.push(d.replica.url);
        recheck = again;
        // While the load runs, this node shows its claim to its own next decisions.
        expect(claimedHere(rt, [R1, R2])).toEqual([d.replica.url]);
        return d.replica.url;
      }),
    );
    expect(r.err).toBeUndefined();
    expect(went).toEqual([R2]);
    // Held until the request could be queued and loaded: as long as the placement's wait lasts.
    expect(s.ttls.every((t) => t === s.config.queue_timeout_ms + s.config.load_timeout_ms)).toBe(true);
    // A load that waits for room claims again first, on the replica it loads on, seeing nothing.
    expect(recheck).toBeDefined();
    s.claims.length = 0;
    expect(await recheck!()).toBe(R2);
    expect(s.claims).toEqual([`x@${R2}`]);
    // The decision's claim and placement end with it.
    expect(claimedHere(rt, [R1, R2])).toEqual([]);
    expect(s.released).toEqual([`x@${R2}`]);
  });

  it('overrides a placement on a replica it has seen down, and never goes there', async () => {
    const s = await setup({ [R1]: {}, [R2]: { health: 'down' } });
    await s.placedBy(R2);
    const { r, went } = await s.placeAnywhere();
    expect(r.err).toBeUndefined();
    expect(went).toEqual([R1]);
    // Claimed where it decided, refused, then claimed again having seen R2's placement.
    expect(s.claims).toEqual([`x@${R1}`, `x@${R1} seen ${R2}`]);
  });

  it('does not follow a placement onto a replica seen down since: it decides among the others', async () => {
    // The request came when R2 was up (and busier than R1); another node has placed `x` on R2.
    const s = await setup({ [R1]: {}, [R2]: { waiting: 3 } });
    const { rt } = s;
    await s.placedBy(R2);
    // Seen down by every read after its first claim.
    const claim = rt.store.claimPlacement.bind(rt.store);
    rt.store.claimPlacement = (...a) => {
      s.world[R2] = { health: 'down' };
      return claim(...a);
    };
    const { r, went } = await s.placeAnywhere();
    expect(r.err).toBeUndefined();
    expect(went).toEqual([R1]);
    // Its first claim lost to R2 (up as it decided); the next, R2 now down, overrides it.
    expect(s.claims).toEqual([`x@${R1}`, `x@${R1}`, `x@${R1} seen ${R2}`]);
  });

  it('decides again at most three times when the placement keeps moving, then loads where it decided', async () => {
    const s = await setup({ [R1]: {}, [R2]: {} });
    const { rt } = s;
    // Every claim finds the adapter placed on a replica of another router's configuration.
    const elsewhere = 'http://theirs:8000';
    rt.store.claimPlacement = async (adapter, url, seen) => {
      s.claims.push(`${adapter}@${url}${seen ? ` seen ${seen}` : ''}`);
      return elsewhere;
    };
    const admitted: { url: string; recheck: boolean }[] = [];
    const r = await s.settle(
      s.place(async (d, _q, recheck) => {
        admitted.push({ url: d.replica.url, recheck: recheck !== undefined });
        return d.replica.url;
      }),
    );
    expect(r.err).toBeUndefined();
    // The first claim and three more rounds; then its own decision, with no recheck to lose again.
    expect(s.claims).toHaveLength(4);
    expect(admitted).toHaveLength(1);
    expect(admitted[0]!.recheck).toBe(false);
    // Each round released its claim here.
    expect(claimedHere(rt, [R1, R2])).toEqual([]);
  });

  it('a load told the adapter was placed elsewhere while it waited follows that placement', async () => {
    // R2 busier: a decision of its own goes to R1.
    const s = await setup({ [R1]: {}, [R2]: { waiting: 1 } }, { saturation_mode: 'count' });
    const { rt } = s;
    const went: string[] = [];
    const r = await s.settle(
      s.place(async (d) => {
        went.push(d.replica.url);
        if (went.length === 1) {
          // Another node took the placement while this load waited for room.
          await rt.store.releasePlacement('x', R1);
          await rt.store.claimPlacement('x', R2, undefined, rt.clock.now(), 60_000);
          s.claims.length = 0;
          throw new PlacedElsewhere('x', R2);
        }
        return d.replica.url;
      }),
    );
    expect(r.err).toBeUndefined();
    expect(went).toEqual([R1, R2]);
    // Straight there: no claim of its own lost first.
    expect(s.claims).toEqual([`x@${R2}`]);
    expect(claimedHere(rt, [R1, R2])).toEqual([]);
  });

  it('each placement lost while waiting counts as a round: at most three, then it loads where it decided', async () => {
    const s = await setup({ [R1]: {}, [R2]: {} });
    // A recheck (given while rounds are left) always finds the adapter placed by another configuration.
    const admitted: boolean[] = [];
    const r = await s.settle(
      s.place(async (d, _q, recheck) => {
        admitted.push(recheck !== undefined);
        if (recheck) throw new PlacedElsewhere('x', 'http://theirs:8000');
        return d.replica.url;
      }),
    );
    expect(r.err).toBeUndefined();
    expect(admitted).toEqual([true, true, true, false]);
  });

  it('a decision shows its claim to the next decision of this process before any await', async () => {
    const s = await setup({ [R1]: {}, [R2]: {} });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const seen: (boolean | undefined)[] = [];
    const first = s.place(async (d) => {
      await gate;
      return d.replica.url;
    });
    await s.clock.run();
    const second = s.place(async (d) => {
      seen.push(d.replica.adapter?.claimed);
      return d.replica.url;
    });
    const r2 = await s.settle(second);
    release();
    const r1 = await s.settle(first);
    expect([r1.v, r2.v]).toEqual([r2.v, r1.v]);
    expect(seen).toEqual([true]);
  });
});

describe('Placement: spreading past a saturated placement', () => {
  // Saturation by the replicas' queues (`count`): what the views say, without the work model.
  const COUNT = { saturation_mode: 'count' };
  const placed = { adapter: { state: 'loading' as const, lastUsed: 0, inFlight: 0, placed: true } };

  it('claims a second replica over a placement whose replica is up, fresh and saturated', async () => {
    const s = await setup({ [R1]: { ...placed, waiting: 100 }, [R2]: {} }, COUNT);
    await s.placedBy(R1);
    const { r, went } = await s.placeAnywhere();
    expect(r.err).toBeUndefined();
    expect(went).toEqual([R2]);
    expect(s.claims).toEqual([`x@${R2} seen ${R1}`]);
  });

  it('a placement on a replica exactly at saturation 1 is saturated: spread past, not followed', async () => {
    const s = await setup(
      { [R1]: { ...placed, waiting: 4 }, [R2]: {} },
      { ...COUNT, target_waiting_per_replica: 4 },
    );
    await s.placedBy(R1);
    const r = await s.settle(s.place(async (d) => d.replica.url));
    expect(r.v).toBe(R2);
    expect(s.claims).toEqual([`x@${R2} seen ${R1}`]);
  });

  it('follows a placement it cannot judge (no fresh poll) or that is not saturated', async () => {
    for (const r1 of [{ ...placed, waiting: 100, snapshotAt: 0, checkedAt: 0 }, { ...placed }]) {
      const s = await setup({ [R1]: r1, [R2]: { waiting: 1 } }, COUNT);
      await s.placedBy(R1);
      const { r, went } = await s.placeAnywhere();
      expect(r.err).toBeUndefined();
      expect(went).toEqual([R1]);
      expect(s.claims.every((c) => !c.includes('seen'))).toBe(true);
    }
  });

  it('under predicted saturation, spreads past a placement predicted slower than the chosen replica by the margin', async () => {
    const s = await setup({ [R1]: placed, [R2]: {} }, { saturation_mode: 'predicted' });
    await s.placedBy(R1);
    const ctx: SchedulingContext = {
      now: T0,
      policy: schedulingPolicy(s.config),
      random: s.rt.random,
      // R1's queue is predicted 10 s long, R2's 100 ms.
      predict: (c) => {
        c.ttftMs = c.url === R1 ? 10_000 : 100;
      },
    };
    const r = await s.settle(s.place(async (d) => d.replica.url, { ctx }));
    expect(r.v).toBe(R2);
    expect(s.claims).toEqual([`x@${R2} seen ${R1}`]);
  });

  it('never spreads past a placement on a replica seen down: it overrides it, a round trip later', async () => {
    const s = await setup({ [R1]: { ...placed, waiting: 100, health: 'down' }, [R2]: {} }, COUNT);
    await s.placedBy(R1);
    const r = await s.settle(s.place(async (d) => d.replica.url));
    expect(r.v).toBe(R2);
    expect(s.claims).toEqual([`x@${R2}`, `x@${R2} seen ${R1}`]);
  });

  it('a request the placed replica cannot serve (its context is too short) goes to one that can', async () => {
    const s = await setup({ [R1]: placed, [R2]: {} }, COUNT);
    await s.placedBy(R1);
    const ctx: SchedulingContext = {
      now: T0,
      policy: schedulingPolicy(s.config),
      random: s.rt.random,
      contextOf: (url) => (url === R1 ? 2048 : 32_768),
    };
    s.claims.length = 0;
    const r = await s.settle(s.place(async (d) => d.replica.url, { ctx, contextTokens: 4000 }));
    expect(r.err).toBeUndefined();
    expect(r.v).toBe(R2);
    // Its claim lost to R1's placement, which it cannot follow: a copy past it (R1's placement stays).
    expect(s.claims).toEqual([`x@${R2}`, `x@${R2} seen ${R1}`]);
  });
});

describe('Placement: what needs a claim', () => {
  it("a replica holding the adapter only by another node's placement is claimed; a static adapter never", async () => {
    const placed = { adapter: { state: 'loading' as const, lastUsed: 0, inFlight: 0, placed: true } };
    const s = await setup({ [R1]: placed, [R2]: { waiting: 1 } }, { saturation_mode: 'count' });
    await s.placedBy(R1);
    const r = await s.settle(s.place(async (d) => d.replica.url));
    expect(r.v).toBe(R1);
    expect(s.claims).toEqual([`x@${R1}`]);
    // A static adapter is never loaded by the router: no placement to agree on.
    s.claims.length = 0;
    const boot: Resolved = { kind: 'static', adapter: { name: 'x' } };
    const st = await s.settle(s.place(async (d) => d.replica.url, { resolved: boot }));
    expect(st.err).toBeUndefined();
    expect(s.claims).toEqual([]);
  });

  it('no replica can serve it: no_replica, not a failure of its own', async () => {
    // llama.cpp serves only the adapters it was started with: no replica can load `x`.
    const s = await setup({ [R1]: { backend: 'llamacpp' }, [R2]: { backend: 'llamacpp' } });
    const r = await s.settle(s.place(async (d) => d.replica.url));
    expect((r.err as RouterError).code).toBe('no_replica');
    expect(s.claims).toEqual([]);
  });
});

describe('Placement: no room on the chosen replica', () => {
  it('escalates a 503 for no room to a wait for room anywhere, decided again', async () => {
    const s = await setup({ [R1]: {}, [R2]: {} }, { room_wait: 'escalate' });
    const queues: number[] = [];
    const r = await s.settle(
      s.place(async (d, q) => {
        queues.push(q);
        if (queues.length === 1) throw errors.noRoom('x', d.replica.url, 1);
        return d.replica.url;
      }),
    );
    expect(r.err).toBeUndefined();
    expect(queues).toHaveLength(2);
    // Every claim of the request ended.
    expect(claimedHere(s.rt, [R1, R2])).toEqual([]);
    expect(s.released).toHaveLength(2);
  });

  const busy = {
    residentCount: 2,
    residents: ['a', 'b'].map((name) => ({
      name,
      state: 'loaded' as const,
      since: 0,
      lastUsed: 0,
      inFlight: 1,
    })),
  };

  /** Places `x` on a fleet where every adapter is busy; when it is admitted, and what it wanted meanwhile. */
  async function busyFleet(extra: Record<string, unknown>, resolved: Resolved = X) {
    const s = await setup({ [R1]: busy, [R2]: busy }, extra);
    const wanted = new Set<string>();
    const views = s.rt.store.views.bind(s.rt.store);
    s.rt.store.views = (...a) => {
      for (const u of [R1, R2]) for (const n of s.rt.manager.roomWants.on(u)) wanted.add(`${n}@${u}`);
      return views(...a);
    };
    const at: number[] = [];
    const r = await s.settle(s.place(async (d) => (at.push(s.clock.now()), d.replica.url), { resolved }));
    expect(r.err).toBeUndefined();
    return { s, at, wanted: [...wanted].sort() };
  }

  it('waits for room anywhere while no replica can start the load, wanted on every replica, until its deadline', async () => {
    const { s, at, wanted } = await busyFleet({ room_wait: 'anywhere', queue_timeout_ms: 2000 });
    // Admitted (its load to wait on the chosen replica) once the wait for room anywhere ran out, not after.
    expect(at).toEqual([T0 + 2000]);
    expect(wanted).toEqual([`x@${R1}`, `x@${R2}`]);
    // Its want of room ended with it.
    expect(s.rt.manager.roomWants.size).toBe(0);
  });

  it('under escalate, past replica_wait_ms with no replica able to load, it waits for room anywhere', async () => {
    const { at } = await busyFleet({ room_wait: 'escalate', replica_wait_ms: 0, queue_timeout_ms: 2000 });
    expect(at).toEqual([T0 + 2000]);
  });
});

/** A RoomWait whose TTFT hold says "hold" for its first `n` decisions (what `holds` weighs is room-wait.ts's). */
class HoldsFor extends RoomWait {
  decided: string[] = [];
  constructor(
    private n: number,
    config: ConstructorParameters<typeof RoomWait>[0],
    started: number,
  ) {
    super(config, started);
  }
  override holds(_now: number, d: Parameters<RoomWait['holds']>[1]): boolean {
    this.decided.push((d as unknown as { url: string }).url);
    return this.n-- > 0;
  }
}

/** Places one request held once for the objective: how many wants of room there were while it was held. */
async function wantsWhileHeldOnce(world: World, resolved: Resolved = X) {
  const s = await setup(world, { room_wait: 'replica' });
  const wait = new HoldsFor(1, s.config, T0);
  let wants = -1;
  const views = s.rt.store.views.bind(s.rt.store);
  s.rt.store.views = (...a) => {
    wants = s.rt.manager.roomWants.size;
    return views(...a);
  };
  const r = await s.settle(s.place(async (d) => d.replica.url, { wait, resolved }));
  expect(r.err).toBeUndefined();
  return { s, wants };
}

describe('Placement: held for the TTFT objective', () => {
  it('waits a fallback period per hold, decides again on fresh views, counts the request held once, wants room while held', async () => {
    // Waiting on the replica with lru: no victims read, so each decision is one hold check.
    const s = await setup({ [R1]: {}, [R2]: {} }, { room_wait: 'replica' });
    const wait = new HoldsFor(2, s.config, T0);
    const wanted: string[][] = [];
    const holds = async () => (await s.rt.metrics.ttftHolds.get()).values[0]?.value ?? 0;
    const views = s.rt.store.views.bind(s.rt.store);
    s.rt.store.views = (...a) => {
      wanted.push([R1, R2].flatMap((u) => s.rt.manager.roomWants.on(u).map((n) => `${n}@${u}`)));
      return views(...a);
    };
    const at: number[] = [];
    const r = await s.settle(s.place(async (d) => (at.push(s.clock.now()), d.replica.url), { wait }));
    expect(r.err).toBeUndefined();
    expect(wait.decided).toHaveLength(3);
    expect(at).toEqual([T0 + 2 * ROOM_FALLBACK_MS]);
    expect(await holds()).toBe(1);
    // While held for a replica without `x`, it wants the slot it goes for there (and only there).
    expect(wanted.slice(0, 2)).toEqual(wait.decided.slice(0, 2).map((u) => [`x@${u}`]));
    expect(s.rt.manager.roomWants.size).toBe(0);
  });

  it('held for a replica holding its adapter, it wants no slot; counted once', async () => {
    const loaded = { adapter: { state: 'loaded' as const, lastUsed: 0, inFlight: 0 } };
    const { s, wants } = await wantsWhileHeldOnce({ [R1]: loaded, [R2]: loaded });
    expect(wants).toBe(0);
    expect((await s.rt.metrics.ttftHolds.get()).values[0]?.value).toBe(1);
  });

  it('a base-model request held wants no slot', async () => {
    const { wants } = await wantsWhileHeldOnce({ [R1]: {}, [R2]: {} }, { kind: 'base' });
    expect(wants).toBe(0);
  });
});

describe('Placement: what a decision weighs', () => {
  it('reads the residents (victims) once, only for a cold decision whose configuration weighs them', async () => {
    // `eviction: value` weighs victims; a cold request reads residents once, then decides on them.
    const s = await setup({ [R1]: {}, [R2]: {} }, { eviction: 'value' });
    await s.settle(s.place(async (d) => d.replica.url));
    expect(s.reads).toEqual([true]);
    // A request for a resident adapter never pays for them.
    s.reads.length = 0;
    const loaded = { adapter: { state: 'loaded' as const, lastUsed: 0, inFlight: 0 } };
    s.world[R1] = loaded;
    s.world[R2] = loaded;
    await s.settle(s.place(async (d) => d.replica.url));
    expect(s.reads).toEqual([]);
    // Nor the base model, nor a fleet that never loads (`max_loaded_adapters: 0`).
    s.world[R1] = {};
    s.world[R2] = {};
    await s.settle(s.place(async (d) => d.replica.url, { resolved: { kind: 'base' } }));
    expect(s.reads).toEqual([]);
    const never = await setup({ [R1]: {}, [R2]: {} }, { eviction: 'value', max_loaded_adapters: 0 });
    const boot: Resolved = { kind: 'static', adapter: { name: 'x' } };
    await never.settle(never.place(async (d) => d.replica.url, { resolved: boot }));
    expect(never.reads).toEqual([]);
  });

  it('the default configuration (lru, wait on the replica) does not read residents at all', async () => {
    const s = await setup({ [R1]: {}, [R2]: {} }, { room_wait: 'replica' });
    await s.settle(s.place(async (d) => d.replica.url));
    expect(s.reads).toEqual([]);
  });

  it('gives the victims their cost by the configured policy: frequency, and copies not being unloaded', async () => {
    const held = (names: string[], unloading: string[] = []) => ({
      residentCount: names.length,
      residents: names.map((name) => ({
        name,
        state: unloading.includes(name) ? ('unloading' as const) : ('loaded' as const),
        since: 0,
        lastUsed: 0,
        inFlight: 0,
      })),
    });
    const s = await setup({ [R1]: held(['a', 'b']), [R2]: held(['a', 'b'], ['a']) }, { eviction: 'value' });
    s.rt.adapterStats.observe('a', T0);
    s.rt.adapterStats.observe('b', T0);
    const ctx: SchedulingContext = { now: T0, policy: schedulingPolicy(s.config), random: s.rt.random };
    await s.settle(s.place(async (d) => d.replica.url, { ctx }));
    const r = (name: string) => ({ name, state: 'loaded' as const, since: 0, lastUsed: 0, inFlight: 0 });
    const policy = EVICTION_POLICIES.value!;
    const vctx = (freq: number, copies: number) => ({ now: T0, frequency: () => freq, copies: () => copies });
    // Both asked for once; `b` has two copies, `a` one left (the other is being unloaded).
    const f = s.rt.adapterStats.frequency('a', T0);
    expect(f).toBeGreaterThan(0);
    expect(ctx.victimCost!(r('a'))).toBe(policy.cost(r('a'), vctx(f, 1)));
    expect(ctx.victimCost!(r('b'))).toBe(policy.cost(r('b'), vctx(f, 2)));
    expect(ctx.victimCost!(r('a'))).not.toBe(ctx.victimCost!(r('b')));
    // An adapter on no replica counts as one copy.
    expect(ctx.victimCost!(r('c'))).toBe(policy.cost(r('c'), vctx(0, 1)));
    expect(ctx.isStatic!('x')).toBe(false);
  });

  it('marks a registered holder whose reported residency lacks the weights as evicted', async () => {
    const loaded = { adapter: { state: 'loaded' as const, lastUsed: 0, inFlight: 0 } };
    const s = await setup({ [R1]: loaded });
    const residency = (cpu: string[]) => ({ residency: { cpu } }) as never;
    const evicted: (boolean | undefined)[] = [];
    for (const cpu of [['y'], ['x']]) {
      s.rt.poller.lastLoad.set(R1, residency(cpu));
      await s.settle(s.place(async (d) => (evicted.push(d.replica.adapter?.evicted), d.replica.url)));
    }
    expect(evicted).toEqual([true, undefined]);
    // A placed (not yet loaded) holder is not "evicted": it has no weights yet.
    s.world[R1] = { adapter: { state: 'loading', lastUsed: 0, inFlight: 0, placed: true } };
    s.rt.poller.lastLoad.set(R1, residency([]));
    await s.settle(s.place(async (d) => (evicted.push(d.replica.adapter?.evicted), d.replica.url)));
    expect(evicted[2]).toBeUndefined();
    // A replica without the adapter, its residency reported: nothing to mark, and no failure.
    s.world[R1] = {};
    const r = await s.settle(s.place(async (d) => d.replica.url));
    expect(r.err).toBeUndefined();
  });
});

describe('Placement: a replica seen down while the load ran', () => {
  it('decides again, once per replica at most, then refuses with no_replica', async () => {
    const s = await setup({ [R1]: {}, [R2]: {} });
    let admits = 0;
    const r = await s.settle(
      s.place(async (d) => {
        admits++;
        throw new SeenDown(d.replica.url);
      }),
    );
    expect(r.err).toBeInstanceOf(RouterError);
    expect((r.err as RouterError).code).toBe('no_replica');
    expect(admits).toBe(3);
    expect(claimedHere(s.rt, [R1, R2])).toEqual([]);
  });

  it('gives any other error of the load to the caller, claim and placement ended', async () => {
    const s = await setup({ [R1]: {}, [R2]: {} });
    const boom = new Error('load failed');
    let admits = 0;
    const r = await s.settle(
      s.place(async () => {
        admits++;
        throw boom;
      }),
    );
    expect(r.err).toBe(boom);
    expect(admits).toBe(1);
    expect(claimedHere(s.rt, [R1, R2])).toEqual([]);
    expect(s.released).toHaveLength(1);
  });
});
