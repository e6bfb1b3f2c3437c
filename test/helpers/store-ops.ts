import fc from 'fast-check';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import type { RedisFleetStore } from '../../src/fleet/redis/redis-store';
import type { BudgetWindow, FleetStore, LoadEnd } from '../../src/fleet/store';
import type { FleetEvent, ReplicaSnapshot, ReplicaSpec } from '../../src/fleet/types';

/**
 * Operation sequences for the differential test of the fleet stores (store-differential.test.ts):
 * the same steps run against the in-process store and against Redis stores of several nodes
 * sharing one prefix. Everything here is data (printable, shrinkable); `runStep` gives a step's
 * answer as plain JSON, `observe` the state every caller can see.
 */

export const URLS = ['http://10.0.0.1:8000', 'http://10.0.0.2:8000', 'http://10.0.0.3:8080'] as const;
/** The third replica is llama.cpp: its adapters are matched by path. */
export const SPECS: ReplicaSpec[] = [
  { url: URLS[0], backend: 'vllm', priority: 0 },
  { url: URLS[1], backend: 'vllm', priority: 1 },
  { url: URLS[2], backend: 'llamacpp', priority: 0 },
];
export const ADAPTERS = ['a', 'b', 'c', 'd'] as const;
/** What a trim's unload makes room for (room.ts EXCESS): no adapter's name. */
export const TRIM_FOR = '\u0000excess';
export const NODES = 3;
/** Ids as nodes make them, `<node>-<seq>` (src/runtime.ts `nextLeaseId`): the views count each node's apart. */
const LEASES = ['n0-0', 'n0-1', 'n1-0', 'n1-1', 'n2-0', 'n2-1'] as const;
const BUDGET_KEYS = ['fleet', 'consumer:x'] as const;
/**
 * Times the memory store and Redis measure alike only when nothing expires during a run: lock
 * TTLs, placements and budget windows are a minute; lease ages are either 0 (every lease is
 * older) or an hour (none is).
 */
export const LONG_MS = 60_000;
const MAX_AGES = [0, 3_600_000] as const;
/** A retain's grace: none (any replica unclaimed since an earlier step is due) or an hour (none is). */
const GRACES = [0, 3_600_000] as const;
/** Node `i`'s id: the Redis side's stores are made with it, the memory side passes it. */
export const nodeId = (i: number) => `n${i}`;

const pathOf = (name: string) => `/adapters/${name}`;

export type Op =
  | { op: 'upsert'; node: number; url: number; priority: number }
  | {
      op: 'snapshot';
      node: number;
      url: number;
      ok: boolean;
      /** The poll began this many steps back (0: just before this step). */
      back: number;
      registry: number[];
      active: number[];
      waiting: number;
    }
  /** An up verdict handed on without its poll's figures (seen-down.ts), the poll begun `back` steps back. */
  | { op: 'verdict'; node: number; url: number; back: number }
  | { op: 'outcome'; node: number; url: number; ok: boolean }
  | { op: 'beginLoad'; node: number; url: number; adapter: number; limit: number }
  /** `own`: the fence's own replica and adapter (else `url`, `adapter`: a caller confused or stale). */
  | { op: 'finishLoad'; node: number; url: number; adapter: number; fence: number; own: boolean; ok: LoadEnd }
  /** `pick`: an adapter loaded now (in the memory store; `adapter` chooses which), else `url`, `adapter`. */
  /** `for`: the adapter the unload makes room for (ADAPTERS.length: a trim, TRIM_FOR); `limit`: the caller's
   * `max_loaded_adapters`, by which a room made for `for` is judged (null: none given). */
  | {
      op: 'beginUnload';
      node: number;
      url: number;
      adapter: number;
      for: number | null;
      limit: number | null;
      pick: boolean;
    }
  | {
      op: 'finishUnload';
      node: number;
      url: number;
      adapter: number;
      fence: number;
      own: boolean;
      ok: boolean;
    }
  | { op: 'holds'; node: number; url: number; adapter: number; fence: number; own: boolean }
  | { op: 'forget'; node: number; url: number; adapter: number }
  | { op: 'touch'; node: number; url: number; adapter: number }
  | { op: 'place'; node: number; adapter: number; url: number; seen: number | null; claimer: number | null }
  | { op: 'unplace'; node: number; adapter: number; url: number; claimer: number | null }
  | { op: 'acquire'; node: number; lease: number; url: number; adapter: number | null }
  /** The request path's one round trip: views of every replica, then a lease (acquire's). */
  | { op: 'viewsAndLease'; node: number; lease: number; url: number; adapter: number | null }
  /** A node's recovery taking leases again in one batch (`retake`): each as `acquire`, none reclaimed refused here (ages 0 or an hour). */
  | { op: 'retake'; node: number; leases: { lease: number; url: number; adapter: number | null }[] }
  | { op: 'release'; node: number; lease: number; status: number | null }
  | { op: 'expire'; node: number; maxAge: number }
  | { op: 'budget'; node: number; key: number; limit: number }
  /** Units given back to a window a spend was granted in (index 12: a window never opened). */
  | { op: 'refund'; node: number; window: number; count: number }
  | { op: 'event'; node: number; url: number; adapter: number }
  /** The node routes to exactly `urls` now (a poll round's `retainReplicas`). */
  | { op: 'retain'; node: number; urls: number[]; grace: number }
  /** A router configuration registers: it manages one more adapter name. */
  | { op: 'configure'; adapter: number }
  /** Redis is emptied (FLUSHALL) and every process restarts: the memory store starts afresh. */
  | { op: 'flush' };

const node = fc.nat(NODES - 1);
const url = fc.nat(URLS.length - 1);
const adapter = fc.nat(ADAPTERS.length - 1);
/** A placement's claimer (one request's decision), or none (a caller that drops it at once). */
const claimer = fc.option(fc.nat(2), { nil: null });
/** A step that takes a lease (alone, or with the views). */
function leaseTaking<K extends 'acquire' | 'viewsAndLease'>(op: K) {
  return fc.record({
    op: fc.constant(op),
    node,
    lease: fc.nat(LEASES.length - 1),
    url,
    adapter: fc.option(adapter, { nil: null }),
  });
}

/** Index into the fences handed out so far (mod their count), or a fence never handed out. */
const fence = fc.nat(12);
const subset = (n: number) => fc.uniqueArray(fc.nat(n - 1), { maxLength: n });
/**
 * Mostly true: finishes and checks name their fence's own change, loads succeed, unloads pick a
 * loaded adapter, so sequences reach loaded and unloaded states (uniform choices rarely do).
 */
const mostly = fc.oneof(
  { weight: 4, arbitrary: fc.constant(true) },
  { weight: 1, arbitrary: fc.constant(false) },
);

export const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ op: fc.constant('upsert' as const), node, url, priority: fc.nat(1) }) },
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('snapshot' as const),
      node,
      url,
      ok: fc.boolean(),
      back: fc.nat(3),
      registry: subset(ADAPTERS.length),
      active: subset(ADAPTERS.length),
      waiting: fc.nat(3),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('verdict' as const), node, url, back: fc.nat(3) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('outcome' as const), node, url, ok: fc.boolean() }) },
  {
    weight: 4,
    arbitrary: fc.record({ op: fc.constant('beginLoad' as const), node, url, adapter, limit: fc.nat(3) }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('finishLoad' as const),
      node,
      url,
      adapter,
      own: mostly,
      fence,
      // 'static': "already loaded" for an adapter the replica registered at start; 'replayed': an
      // end sent again (ended-locks.ts), which forgets the load.
      ok: fc.oneof(
        { weight: 4, arbitrary: fc.constant(true) },
        { weight: 1, arbitrary: fc.constantFrom(false, 'static' as const, 'replayed' as const) },
      ),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('beginUnload' as const),
      node,
      url,
      adapter,
      pick: mostly,
      // ADAPTERS.length: a trim's (TRIM_FOR), which makes room for no one.
      for: fc.option(fc.nat(ADAPTERS.length), { nil: null }),
      // Up to every adapter: a replica full and not full, over its limit too.
      limit: fc.option(fc.nat(ADAPTERS.length), { nil: null, freq: 4 }),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('finishUnload' as const),
      node,
      url,
      adapter,
      own: mostly,
      fence,
      ok: fc.boolean(),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant('holds' as const), node, url, adapter, fence, own: mostly }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('forget' as const), node, url, adapter }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('touch' as const), node, url, adapter }) },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('place' as const),
      node,
      adapter,
      url,
      seen: fc.option(url, { nil: null }),
      claimer,
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant('unplace' as const), node, adapter, url, claimer }),
  },
  { weight: 5, arbitrary: leaseTaking('acquire') },
  { weight: 3, arbitrary: leaseTaking('viewsAndLease') },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('retake' as const),
      node,
      leases: fc.array(
        fc.record({
          lease: fc.nat(LEASES.length - 1),
          url,
          adapter: fc.option(adapter, { nil: null }),
        }),
        { maxLength: 4 },
      ),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('release' as const),
      node,
      lease: fc.nat(LEASES.length - 1),
      status: fc.option(fc.constantFrom(200, 404, 502), { nil: null }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('expire' as const), node, maxAge: fc.nat(1) }) },
  {
    weight: 2,
    arbitrary: fc.record({ op: fc.constant('budget' as const), node, key: fc.nat(1), limit: fc.nat(2) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant('refund' as const), node, window: fc.nat(12), count: fc.nat(2) }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('event' as const), node, url, adapter }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('configure' as const), adapter }) },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('retain' as const),
      node,
      // As often none: a replica is forgotten only once every node that claimed it dropped it.
      urls: fc.oneof(fc.constant<number[]>([]), subset(URLS.length)),
      grace: fc.nat(1),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ op: 'flush' as const }) },
);

/** One side of the comparison: the stores its nodes call (one shared in-process store, or one Redis store per node). */
export interface Side {
  node(i: number): FleetStore;
  /** The Redis side: its fences are its own (each side's clock sets them, see `World.fences`). */
  redis?: boolean;
}

/** What the router has configured and the fences handed out: the same for both sides. */
export interface World {
  /** Adapter names some configuration manages, and how often that set grew. */
  managed: Set<string>;
  managedVersion: number;
  /** Shared time before each step so far (Redis TIME), oldest first. */
  times: number[];
  /**
   * Fences handed out, in order, with their change: the memory side's (`fence`) and the Redis
   * side's (`shared`). They differ: each is at least its store's clock in tenths of a ms (the
   * step's `at`, Redis's TIME as the script runs), so the sides must agree on whether one was
   * handed out, and each side's must exceed every earlier one, across flushes too.
   */
  fences: { fence: number; shared: number; url: string; adapter: string; kind: 'load' | 'unload' }[];
  /**
   * Windows budget spends were granted in, in order: the memory side's and the Redis side's (each
   * opened on its store's clock). A refund names one; across flushes too (none takes it back).
   */
  windows: { memory?: BudgetWindow; shared?: BudgetWindow }[];
}

export function newWorld(): World {
  return { managed: new Set(), managedVersion: 0, times: [], fences: [], windows: [] };
}

/** The change a finish or check names: a fence handed out (index 12: one nobody was handed). */
function changeOf(
  side: Side,
  w: World,
  op: { url: number; adapter: number; fence: number; own: boolean },
  kind?: 'load' | 'unload',
): [string, string, number] {
  // Its own change: a fence of the kind it finishes (a load's fence finishing an unload is the
  // confused caller's case, below).
  const of = op.own && kind ? w.fences.filter((f) => f.kind === kind) : w.fences;
  const f = op.fence < 12 && of.length > 0 ? of[op.fence % of.length]! : undefined;
  const given = f && (side.redis ? f.shared : f.fence);
  if (f && op.own) return [f.url, f.adapter, given!];
  return [URLS[op.url]!, ADAPTERS[op.adapter]!, given ?? 1_000_000 + op.fence];
}

function snapshotOf(op: Extract<Op, { op: 'snapshot' }>, w: World, at: number): ReplicaSnapshot {
  const startedAt = w.times[Math.max(0, w.times.length - 1 - op.back)]!;
  if (!op.ok) return { at, startedAt, sharedStartedAt: startedAt, ok: false, error: 'ECONNREFUSED' };
  const names = op.registry.map((i) => ADAPTERS[i]!);
  const llama = SPECS[op.url]!.backend === 'llamacpp';
  return {
    at,
    startedAt,
    sharedStartedAt: startedAt,
    ok: true,
    load: {
      waiting: op.waiting,
      running: op.active.length,
      kvUsage: llama ? undefined : 0.25,
      activeAdapters: op.active.map((i) => ADAPTERS[i]!).sort(),
      malformedLines: 0,
    },
    registry: llama ? undefined : names.map((name) => ({ name, path: pathOf(name) })),
    llamaAdapters: llama ? names.map((name, id) => ({ id, path: pathOf(name) })) : undefined,
    managed: (name) => w.managed.has(name),
    managedVersion: w.managedVersion,
  };
}

/** Runs one step on one side at shared time `at`; returns its answer as plain JSON. */
export async function runStep(side: Side, op: Op, w: World, at: number): Promise<unknown> {
  if (op.op === 'flush' || op.op === 'configure') return null;
  const s = side.node(op.node);
  const u = (i: number) => URLS[i]!;
  const a = (i: number) => ADAPTERS[i]!;
  switch (op.op) {
    case 'upsert': {
      // Claimed by the node that registers it: the memory side says which, and when.
      const spec = { ...SPECS[op.url]!, priority: op.priority };
      return side.redis
        ? s.upsertReplica(spec)
        : (s as MemoryFleetStore).upsertReplica(spec, nodeId(op.node), at);
    }
    case 'retain': {
      const urls = op.urls.map(u);
      const grace = GRACES[op.grace]!;
      // The event's time is the step's on both sides; the memory side is told the node and the time.
      const gone = side.redis
        ? await (s as RedisFleetStore).retainReplicas(urls, grace, at)
        : await (s as MemoryFleetStore).retainReplicas(urls, grace, { at, node: nodeId(op.node) });
      return gone.sort();
    }
    case 'snapshot':
      return s.applySnapshot(u(op.url), snapshotOf(op, w, at));
    case 'verdict': {
      const startedAt = w.times[Math.max(0, w.times.length - 1 - op.back)]!;
      return s.applySnapshot(u(op.url), {
        at,
        startedAt,
        sharedStartedAt: startedAt,
        ok: true,
        verdictOnly: true,
      });
    }
    case 'outcome':
      return s.reportOutcome(u(op.url), op.ok, at);
    case 'beginLoad':
      return s.beginLoad(u(op.url), a(op.adapter), at, op.limit, LONG_MS);
    case 'finishLoad':
      return s.finishLoad(...changeOf(side, w, op, 'load'), op.ok, at);
    case 'beginUnload':
      return s.beginUnload(
        u(op.url),
        a(op.adapter),
        at,
        LONG_MS,
        op.for === null ? undefined : op.for === ADAPTERS.length ? TRIM_FOR : a(op.for),
        op.limit ?? undefined,
      );
    case 'finishUnload':
      return s.finishUnload(...changeOf(side, w, op, 'unload'), op.ok, at);
    case 'holds':
      return s.holds(...changeOf(side, w, op));
    case 'forget':
      return s.forget(u(op.url), a(op.adapter), at);
    case 'touch':
      return s.touch(u(op.url), a(op.adapter), at);
    case 'place':
      return s.claimPlacement(
        a(op.adapter),
        u(op.url),
        op.seen === null ? undefined : u(op.seen),
        at,
        LONG_MS,
        op.claimer === null ? undefined : `c${op.claimer}`,
      );
    case 'unplace':
      return s.releasePlacement(a(op.adapter), u(op.url), op.claimer === null ? undefined : `c${op.claimer}`);
    case 'acquire':
      return s.acquire({
        id: LEASES[op.lease]!,
        url: u(op.url),
        adapter: op.adapter === null ? null : a(op.adapter),
        at,
      });
    case 'viewsAndLease': {
      const name = op.adapter === null ? null : a(op.adapter);
      const lease = { id: LEASES[op.lease]!, url: u(op.url), adapter: name, at };
      const ref = name === null ? undefined : { name, path: pathOf(name) };
      return s.viewsAndLease!(URLS, ref, lease);
    }
    case 'retake':
      return s.retake!(
        op.leases.map((l) => ({
          id: LEASES[l.lease]!,
          url: u(l.url),
          adapter: l.adapter === null ? null : a(l.adapter),
          at,
        })),
      );
    case 'release':
      return s.release(LEASES[op.lease]!, at, op.status ?? undefined);
    case 'expire': {
      const gone = await s.expireLeases(at, MAX_AGES[op.maxAge]!);
      return gone.sort((x, y) => x.id.localeCompare(y.id));
    }
    case 'budget': {
      // The wait is measured on two clocks (the caller's, Redis's): compare whether, and roughly.
      const { waitMs: wait, window } = await s.takeBudget(BUDGET_KEYS[op.key]!, op.limit, LONG_MS, at);
      if (window) noteWindow(w, window, side.redis === true);
      return wait === 0 ? { granted: window?.key ?? null } : { waits: wait > 0 && wait <= LONG_MS };
    }
    case 'refund': {
      const e = op.window < 12 ? w.windows[op.window % Math.max(1, w.windows.length)] : undefined;
      const window = (side.redis ? e?.shared : e?.memory) ?? { key: BUDGET_KEYS[0], opened: 0 };
      // Not a bare number: the comparison reads a number as a fence, whichever its value.
      return { refunded: await s.refundBudget(window, op.count, at) };
    }
    case 'event':
      return s.pushEvent({ at, url: u(op.url), adapter: a(op.adapter), op: 'load', result: 'ok', ms: 5 });
  }
}

/** A granted spend's window: the memory side runs a step first, then the Redis side. */
function noteWindow(w: World, window: BudgetWindow, redis: boolean): void {
  const last = w.windows.at(-1);
  if (redis && last && !last.shared) last.shared = window;
  else w.windows.push(redis ? { shared: window } : { memory: window });
}

/**
 * The step as both sides run it: an unload that picks a loaded adapter names it (read from the
 * memory store, so both sides get the same arguments; a difference shows in the answers anyway).
 */
export async function resolve(op: Op, memory: FleetStore): Promise<Op> {
  if (op.op !== 'beginUnload' || !op.pick) return op;
  const loaded: [number, number][] = [];
  for (const [u, url] of URLS.entries())
    for (const r of await memory.residents(url))
      if (r.state === 'loaded') loaded.push([u, ADAPTERS.indexOf(r.name as (typeof ADAPTERS)[number])]);
  const hit = loaded[op.adapter % Math.max(1, loaded.length)];
  return hit ? { ...op, url: hit[0], adapter: hit[1], pick: false } : op;
}

/**
 * Every replica registered, as each node does when it starts (a sequence begins so; a flush undoes
 * it): by node 0, which claims them (the memory side told so, at `at`).
 */
export async function registerAll(s: FleetStore, at?: number): Promise<void> {
  for (const spec of SPECS)
    await (s instanceof MemoryFleetStore ? s.upsertReplica(spec, nodeId(0), at) : s.upsertReplica(spec));
}

/** Applies what a step changes outside the stores (configurations, fences handed out: `answer` the memory side's, `shared` Redis's). */
export function noteStep(op: Op, w: World, answer: unknown, shared: unknown = answer): void {
  if (op.op === 'configure' && !w.managed.has(ADAPTERS[op.adapter]!)) {
    w.managed.add(ADAPTERS[op.adapter]!);
    w.managedVersion++;
  }
  if ((op.op === 'beginLoad' || op.op === 'beginUnload') && typeof answer === 'number')
    w.fences.push({
      fence: answer,
      shared: typeof shared === 'number' ? shared : answer,
      url: URLS[op.url]!,
      adapter: ADAPTERS[op.adapter]!,
      kind: op.op === 'beginLoad' ? 'load' : 'unload',
    });
}

const byName = <T extends { name: string }>(xs: T[]) => [...xs].sort((x, y) => x.name.localeCompare(y.name));

/**
 * What any caller of the store can see, normalized (order of hash fields, absent vs undefined).
 * `node`: the node reading the views (its leases counted apart), named to the in-process store as
 * the simulation's Redis names it; a Redis node's store reads as that node.
 */
export async function observe(s: FleetStore, adapterIndex: number, node?: string): Promise<unknown> {
  const name = ADAPTERS[adapterIndex % ADAPTERS.length]!;
  const dump = await s.dump();
  const ref = { name, path: pathOf(name) };
  const views = await (s instanceof MemoryFleetStore
    ? s.views(URLS, ref, true, node)
    : s.views(URLS, ref, true));
  return plain({
    specs: (await s.replicaSpecs()).sort((x, y) => x.url.localeCompare(y.url)),
    dump: dump.replicas
      .map((r) => ({ ...r, adapters: byName(r.adapters) }))
      .sort((x, y) => x.url.localeCompare(y.url)),
    views: views.map((v) => ({ ...v, residents: v.residents && byName(v.residents) })),
    inFlightTotal: await s.inFlightTotal(),
    events: byStep(await s.events(200)),
    leased: await leasedAges(s),
  });
}

/**
 * Which residents a store dates an oldest lease of (`residents` asked with a time): alike on both
 * sides. Their ages are not compared: each side dates the lease and the read by its own clock (the
 * step's time here, Redis's TIME there), a few ms apart (test/core/unseen-order.test.ts reads them).
 */
async function leasedAges(s: FleetStore): Promise<string[]> {
  const out: string[] = [];
  for (const url of URLS)
    for (const r of await s.residents(url, 0))
      if (r.leasedFor !== undefined) out.push(`${url} ${r.name} ${r.inFlight}`);
  return out.sort();
}

/**
 * Events in order of their step (each step's events carry its time), and within one step in a
 * fixed order: the order in which one expiry reclaims leases renewed at the same moment is not
 * part of the contract (the memory store keeps the order they were taken, Redis orders by id).
 */
function byStep(events: FleetEvent[]): FleetEvent[] {
  const key = (e: FleetEvent) => JSON.stringify(Object.entries(e).sort(([x], [y]) => x.localeCompare(y)));
  return [...events].sort((x, y) => x.at - y.at || key(x).localeCompare(key(y)));
}

/** JSON's view of a value: undefined fields dropped, as a reply over the wire would. */
export function plain(x: unknown): unknown {
  return x === undefined ? null : (JSON.parse(JSON.stringify(x)) as unknown);
}
