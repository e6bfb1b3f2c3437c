/**
 * A schedule: what happens to the simulated world and when (requests, and every fault kind),
 * generated from a seed. The world's own choices (message trips, timers due at the same instant)
 * come from the same seed through another stream, so dropping actions (shrinking) keeps the rest.
 */
import { seededRandom, type Random } from '../src/random';
import { drawClients, type GaveUp } from './client-draw';
import { drawConfigChanges, drawRecordPlugins, type ConfigChangeDraw } from './config-draw';
import { dur, int } from './draws';
import { overload } from './overload';
import { drawPrefetch, type PrefetchDraw } from './prefetch-draw';
import { reach } from './reach';
import type { LoadFailure, Outage, ScrapeFault } from './replicas';
import { SLOW_HOP_MS } from './world-timings';

export type Action =
  | {
      at: number;
      kind: 'request';
      node: number;
      adapter: number;
      tokens: number;
      prompt: number;
      /** The class its `x-gateway-inference-objective` header names (`WorldSettings.sloClasses`), if any. */
      cls?: string;
      /** Its client gives up (Kong logs 499): dst/client-draw.ts. */
      gaveUp?: GaveUp;
      /** A later plugin answers it after lora-router's access phase decided (source 'exit'): never proxied. */
      exit?: boolean;
      /** The later plugin's status (absent: 200, a cache hit): 503 is request-termination's (maintenance). */
      exitStatus?: number;
      /** ms its log phase's `kong.response.get_source()` round trip takes (absent: answered at once). */
      sourceMs?: number;
      /**
       * A worker still on its node's previous router configuration routes it, if that changed within
       * `WorldSettings.configChanges.staleMs` (dst/config-draw.ts).
       */
      onOldConfig?: boolean;
    }
  | { at: number; kind: 'partition'; node: number; ms: number }
  | { at: number; kind: 'slow'; node: number; ms: number; slowMs: number }
  | { at: number; kind: 'redis-restart'; empty: boolean; downMs: number }
  | { at: number; kind: 'flushall' }
  | { at: number; kind: 'switch'; lost: number }
  | { at: number; kind: 'record-change'; otherState: boolean; gapMs: number }
  | { at: number; kind: 'process-restart'; node: number }
  /** Node `node` goes down (its process dies) and Kong starts it again `ms` later (dst/config-draw.ts). */
  | { at: number; kind: 'node-down'; node: number; ms: number }
  /** Kong pushes a router configuration to one node: a new plugin instance registers its replicas on the node's runtime. */
  | { at: number; kind: 'config-push'; node: number }
  /**
   * Kong changes node `node`'s router configuration: the same `__plugin_id`, a higher `__seq__`,
   * listing the world's replicas `replicas` (indices) only (dst/config-draw.ts).
   */
  | { at: number; kind: 'config-change'; node: number; replicas: number[] }
  /**
   * Kong moves node `node`'s router plugin to a record on the other state (relative to its own now)
   * listing the world's replicas `replicas` (indices) only, none of those the other records list
   * (dst/config-draw.ts `configChanges.move`).
   */
  | { at: number; kind: 'move'; node: number; replicas: number[] }
  | { at: number; kind: 'skew'; node: number; ms: number }
  | { at: number; kind: 'replica-restart'; replica: number; downMs: number }
  | { at: number; kind: 'replica-outage'; replica: number; ms: number; mode: Outage }
  | { at: number; kind: 'scrape'; replica: number; ms: number; mode: ScrapeFault }
  | { at: number; kind: 'slow-load'; replica: number; ms: number; slowMs: number }
  | { at: number; kind: 'load-fail'; replica: number; count: number; failure: LoadFailure }
  | { at: number; kind: 'slow-path'; node: number; replica: number; ms: number; hopMs: number };

export type FaultKind = Exclude<Action['kind'], 'request'>;
/** The faults of Redis and the nodes' links to it (what the staggered cut-offs leave out). */
const SHARED_STATE_FAULTS: readonly FaultKind[] = [
  'partition',
  'slow',
  'redis-restart',
  'flushall',
  'switch',
  'record-change',
  'process-restart',
];
/** The fault kinds a seed draws from its main stream, in order (the seeds found depend on it). */
export const DRAWN_FAULT_KINDS: readonly FaultKind[] = [
  ...SHARED_STATE_FAULTS,
  'skew',
  'replica-restart',
  'replica-outage',
  'scrape',
  'slow-load',
  'load-fail',
];
/**
 * Every fault kind: the drawn ones, then those from streams of their own (so the seeds before them
 * stay): the slow path, and a configuration pushed to one node (dst/reach.ts).
 */
export const FAULT_KINDS: readonly FaultKind[] = [
  ...DRAWN_FAULT_KINDS,
  'slow-path',
  'config-push',
  'config-change',
  'node-down',
  'move',
];

/** The world a seed builds: sizes and settings, drawn once per seed. */
export interface WorldSettings {
  nodes: number;
  replicas: number;
  maxLoadedAdapters: number;
  /** Adapter names (one with a comma: what vLLM's running list cannot carry unambiguously). */
  adapters: string[];
  /**
   * Adapters every replica holds from its start (static to the router), after `adapters` in a
   * request's index. A comma joins two of `adapters`' names: running, vLLM's report spells them.
   */
  staticAdapters?: string[];
  loadMs: number;
  decodeMsPerStep: number;
  coldLoadsPerMinute: number;
  leaseMaxAgeMs: number;
  ttftSloMs: number;
  /**
   * queue_timeout_ms (default 8000): how long a request may wait for room. Shorter where the hold
   * is off, so a crowded schedule's waiters give up sooner (idle simulated time, not exploration).
   */
  queueTimeoutMs?: number;
  /** Kong's upstream read timeout (default 10,000 ms): a request proxied to a hung replica waits this long. */
  upstreamTimeoutMs?: number;
  /** ms of traffic and faults; then faults heal and the world settles. */
  spanMs: number;
  /**
   * node_ttl_ms (absent: 2000, the span: no state is that old before a schedule ends, so a node
   * cut off never reads a whole node count and grants no cold load alone). Shorter, the share runs.
   */
  nodeTtlMs?: number;
  /** The replicas' running slots, vLLM --max-num-seqs (absent: the simulator's 16). */
  maxNumSeqs?: number;
  /** `slo_classes` (absent: none), as the router config spells them. */
  sloClasses?: { name: string; ttft_ms: number; priority: number; max_in_flight?: number }[];
  /** `prefetch` on, with these settings (absent: off, the default; dst/prefetch-draw.ts). */
  prefetch?: PrefetchDraw;
  /**
   * Router configurations change during the run (absent: never; dst/config-draw.ts): the nodes'
   * configurations carry Kong's `__plugin_id` and `__seq__` then.
   */
  configChanges?: ConfigChangeDraw;
}

/**
 * The node_ttl_ms a seed draws: half the seeds the schema's smallest (500, a node cut off reads a
 * whole node count in time and grants its share alone), half the span's 2000 (it rarely does).
 */
export const NODE_TTLS_MS: readonly number[] = [500, 2000];

export interface Schedule {
  seed: number;
  world: WorldSettings;
  actions: Action[];
}

export interface ScheduleOptions {
  /** Actions to generate (requests and faults). */
  actions: number;
  /** Fault kinds enabled (default: all). */
  faults?: readonly FaultKind[];
  /** ms of traffic and faults before the world settles (default DEFAULT_SPAN_MS). */
  spanMs?: number;
  /** The world's node_ttl_ms for every seed (default: each seed draws one of NODE_TTLS_MS, apart from the other draws). */
  nodeTtlMs?: number;
  /**
   * Crowds and SLO classes (default on). Off, every seed draws as before them: the seeds the
   * tests replay by number were found so.
   */
  overload?: boolean;
  /**
   * The batch class's `max_in_flight` and its burst in a share of the class seeds (default on).
   * Off, the class seeds draw as before it (seed 12 of dst-answers.test.ts was found so).
   */
  bound?: boolean;
  /**
   * The shapes of dst/reach.ts (default on, and off with `overload`): a node's own registration
   * first after an emptied state, a lower class held behind a higher one past
   * queue_timeout_ms, a lock end owed on a move to other state, and a registration emptied in
   * each pass (dst/reach-failover.ts). Off, every seed draws as before them.
   */
  reach?: boolean;
  /**
   * Prefetching in a share of the seeds (dst/prefetch-draw.ts; default on, and off with
   * `overload`). Off, every seed's world is as drawn before it.
   */
  prefetch?: boolean;
  /**
   * Clients that give up, later plugins that answer, a slow source call (dst/client-draw.ts; default
   * on, and off with `overload`). Off, every seed's schedule is as drawn before them.
   */
  clients?: boolean;
  /**
   * Router configuration changes in a share of the seeds (dst/config-draw.ts; default OFF, and off
   * with `overload`; the CLI turns them on). Off, every seed's world and schedule are as drawn
   * before them: the seeds tests replay by number keep what they meant.
   */
  configChanges?: boolean;
  /**
   * With configuration changes: the lora-poller as a plugin of its own and moves of a node's router
   * to the other state's replicas (dst/config-draw.ts `drawRecordPlugins`; default OFF, the CLI
   * turns them on). Off, every seed is as drawn before them.
   */
  recordMoves?: boolean;
}

/**
 * The span of a schedule: short, so the requests and faults crowd together (their overlaps come
 * sooner) and little simulated time is idle background (heartbeats and polls cost steps whether
 * anything happens or not).
 */
export const DEFAULT_SPAN_MS = 2000;

const SCRAPE_FAULTS: readonly ScrapeFault[] = ['error', 'timeout', 'garbled', 'truncated'];
const LOAD_FAILURES: readonly LoadFailure[] = ['not-found', 'rank', 'engine'];

const ADAPTERS = ['sql', 'chat', 'team,a', 'team', 'a', 'code', 'math', 'law', 'med', 'fin', 'bio', 'geo'];

export function generate(seed: number, o: ScheduleOptions): Schedule {
  const r = seededRandom(seed * 2654435761);
  const world: WorldSettings = {
    nodes: 3,
    replicas: int(r, 2, 3),
    maxLoadedAdapters: [1, 2, 4][int(r, 0, 2)]!,
    adapters: ADAPTERS.slice(0, int(r, 4, ADAPTERS.length)),
    loadMs: [200, 800, 1500][int(r, 0, 2)]!,
    decodeMsPerStep: [50, 100][int(r, 0, 1)]!,
    coldLoadsPerMinute: [3, 6, 1000][int(r, 0, 2)]!,
    leaseMaxAgeMs: 4000,
    ttftSloMs: [0, 1000][int(r, 0, 1)]!,
    spanMs: o.spanMs ?? DEFAULT_SPAN_MS,
  };
  // Drawn from a stream of their own, so the draws above (and the seeds found before) stay.
  const rs = seededRandom(seed * 2654435761 + 1);
  if (rs() < 0.3) world.staticAdapters = ['sql,chat'];
  // The hold (ttft_slo_ms) waits up to queue_timeout_ms - ttft_slo_ms: with it on, the default
  // 8 s, long enough for a hold past its bound (item 1c) to show; off, 4 s.
  if (world.ttftSloMs === 0) world.queueTimeoutMs = 4000;
  world.upstreamTimeoutMs = 5000;
  // A stream of its own too: every seed's other draws and actions stay as they were before it.
  world.nodeTtlMs =
    o.nodeTtlMs ?? NODE_TTLS_MS[int(seededRandom(seed * 2654435761 + 3), 0, NODE_TTLS_MS.length - 1)]!;
  const requestable = world.adapters.length + (world.staticAdapters?.length ?? 0);
  const faults = (o.faults ?? DRAWN_FAULT_KINDS).filter((k) => DRAWN_FAULT_KINDS.includes(k));
  const actions: Action[] = [];
  // A quarter of the seeds are quiet: a few requests far apart and one fault at most, where a
  // request is often alone on an idle fleet (what the hold must never wait on).
  const quiet = r() < 0.25;
  const count = quiet ? Math.min(o.actions, 3) : o.actions;
  for (let i = 0; i < count; i++) {
    const at = Math.floor(r() * world.spanMs);
    const node = int(r, 0, world.nodes - 1);
    if (faults.length === 0 || r() < (quiet ? 0.95 : 0.8)) {
      actions.push({
        at,
        kind: 'request',
        node,
        adapter: int(r, -1, requestable - 1),
        // Mostly short; some run longer than lease_max_age_ms (renewed by the replica's word).
        tokens: r() < 0.05 ? int(r, 20, 60) : int(r, 1, 6),
        prompt: int(r, 10, 2000),
      });
      continue;
    }
    const kind = faults[int(r, 0, faults.length - 1)]!;
    switch (kind) {
      case 'partition':
        // Now and then every node at once (Redis unreachable to the whole fleet).
        actions.push({ at, kind, node: r() < 0.3 ? -1 : node, ms: dur(r, 200, 3000) });
        break;
      case 'slow':
        actions.push({ at, kind, node, ms: dur(r, 200, 3000), slowMs: dur(r, 50, 3000) });
        break;
      case 'redis-restart':
        actions.push({ at, kind, empty: r() < 0.5, downMs: dur(r, 0, 3000) });
        break;
      case 'flushall':
        actions.push({ at, kind });
        break;
      case 'switch':
        actions.push({ at, kind, lost: int(r, 0, 6) });
        break;
      case 'record-change':
        actions.push({ at, kind, otherState: r() < 0.5, gapMs: dur(r, 0, 1500) });
        break;
      case 'process-restart':
        actions.push({ at, kind, node });
        break;
      case 'skew':
        actions.push({ at, kind, node, ms: int(r, -300, 300) });
        break;
      case 'replica-restart':
      case 'replica-outage':
      case 'scrape':
      case 'slow-load':
      case 'load-fail':
        actions.push(replicaFault(rs, kind, at, world.replicas));
        break;
    }
  }
  // A slow path between one node's host and one replica, from a stream of its own (the seeds
  // without it stay as they were): a share of the busy seeds that fired each drawn kind about as often.
  const path = seededRandom(seed * 2654435761 + 5);
  const slowPaths = (o.faults ?? FAULT_KINDS).includes('slow-path');
  if (!quiet && slowPaths && path() < SLOW_PATH_SHARE)
    actions.push({
      at: int(path, 0, world.spanMs),
      kind: 'slow-path',
      node: int(path, 0, world.nodes - 1),
      replica: int(path, 0, world.replicas - 1),
      ms: dur(path, 200, 3000),
      hopMs: dur(path, SLOW_HOP_MS[0], SLOW_HOP_MS[1]),
    });
  // An emptied state under pressure, from a stream of its own too (found by review at bebce60: no
  // schedule drawn before reached it): a FLUSHALL; right after it, before its heartbeat tells it,
  // a node takes a lease Redis counts nowhere and sends its request down a slow path to a replica,
  // while requests from every node on more adapters than the slots press for that replica's room.
  const emptied = seededRandom(seed * 2654435761 + 6);
  if (
    !quiet &&
    slowPaths &&
    faults.includes('flushall') &&
    world.coldLoadsPerMinute > EMPTIED_MAX_BUDGET &&
    world.adapters.length > 2 * world.maxLoadedAdapters * world.replicas &&
    emptied() < EMPTIED_SHARE
  )
    actions.push(...emptiedUnderPressure(emptied, world));
  // Shapes the draws above rarely make, from a stream of their own: a request on the name with a
  // comma running longer than lease_max_age_ms (its lease renewed only by the replica's word on
  // it, issue 31 item 1a), early, so the requests after it press for its slot.
  // Then, once its lease could have aged out, more cold adapters than a replica's slots ask.
  const shape = seededRandom(seed * 2654435761 + 2);
  if (!quiet && shape() < 0.1) {
    actions.push({
      at: int(shape, 0, 1500),
      kind: 'request',
      node: int(shape, 0, world.nodes - 1),
      adapter: world.adapters.indexOf('team,a'),
      tokens: int(shape, 80, 120),
      prompt: int(shape, 10, 2000),
    });
    // Past lease_max_age_ms whatever the span: these schedules run longer.
    const press = world.leaseMaxAgeMs + 500;
    world.spanMs = Math.max(world.spanMs, press + 1500);
    for (let i = 0; i <= world.maxLoadedAdapters * world.replicas; i++)
      actions.push({
        at: int(shape, press, world.spanMs),
        kind: 'request',
        node: int(shape, 0, world.nodes - 1),
        adapter: int(shape, 0, world.adapters.length - 1),
        tokens: int(shape, 1, 6),
        prompt: int(shape, 10, 2000),
      });
  }
  // Nodes cut off one after another, from a stream of its own too (seeds without it unchanged).
  const stagger = seededRandom(seed * 2654435761 + 4);
  if (
    !quiet &&
    faults.includes('partition') &&
    world.nodeTtlMs <= STAGGER_MAX_TTL_MS &&
    world.coldLoadsPerMinute <= STAGGER_MAX_BUDGET &&
    stagger() < STAGGER_SHARE
  ) {
    // Redis's other faults would blur it: each emptied state or record change allows one budget
    // more, and a link cut or slow, or a process restarted, moves the counts the shape sets up.
    const kept = actions.filter((a) => !REDIS_FAULTS.has(a.kind));
    actions.splice(0, actions.length, ...kept, ...staggeredCutOffs(stagger, world));
  }
  // Crowds and SLO classes (dst/overload.ts), from streams of their own (seeds without them unchanged).
  if (o.overload !== false) overload(seed, quiet, world, actions, o.bound !== false);
  // Shapes reviews found that no draw above reached (dst/reach.ts), after every other draw; not in
  // the schedules as drawn before crowds and classes (`overload` off: the seeds found so replay).
  if (o.reach !== false && o.overload !== false) reach(seed, quiet, world, actions, o.faults ?? FAULT_KINDS);
  // The world only, no action: a seed's schedule stays as it was, its router config turns prefetch on.
  if (o.prefetch !== false && o.overload !== false) drawPrefetch(seed, world);
  // Per request, from a stream of its own: the actions stay, some carry a client's or Kong's draw.
  if (o.clients !== false && o.overload !== false) drawClients(seed, actions);
  // Last: its draws on the requests read the actions as drawn above.
  if (o.configChanges === true && o.overload !== false) {
    drawConfigChanges(seed, world, actions);
    // After them: a move drops or narrows their configuration changes.
    if (o.recordMoves === true) drawRecordPlugins(seed, world, actions);
  }
  actions.sort((a, b) => a.at - b.at);
  return { seed, world, actions };
}

/**
 * The share of busy seeds with a slow path: each drawn kind fires in about 23% of them (3.2 faults
 * of 13 kinds a busy schedule), so the slow path as often.
 */
const SLOW_PATH_SHARE = 0.18;

/**
 * The share of the busy seeds with a budget that is never reached (a third of them) with an
 * emptied state under pressure (a FLUSHALL and a slow path more): about 4% of all seeds.
 */
const EMPTIED_SHARE = 0.5;
/** A budget of 3 or 6 refuses the requests that press for room: the shape could break nothing there. */
const EMPTIED_MAX_BUDGET = 6;

/**
 * A FLUSHALL; within a heartbeat of it, requests from one node whose path to one replica turns
 * slow (they reach it 1.5-3 s late: a lease taken then is not yet the replica's to report); once
 * the other nodes' hold-off after the emptied state is over (two probes), requests from them on
 * other adapters press for room on full replicas.
 */
function emptiedUnderPressure(r: Random, world: WorldSettings): Action[] {
  const at = int(r, 100, Math.max(100, world.spanMs - 1000));
  const node = int(r, 0, world.nodes - 1);
  const request = (from: number, to: number, n: number, adapters: number[]): Action => ({
    at: int(r, from, to),
    kind: 'request',
    node: n,
    adapter: adapters[int(r, 0, adapters.length - 1)]!,
    tokens: int(r, 1, 6),
    prompt: int(r, 10, 2000),
  });
  const all = world.adapters.map((_, i) => i);
  const first = all.filter((i) => i % 2 === 0);
  const others = all.filter((i) => i % 2 === 1);
  const actions: Action[] = [
    { at, kind: 'flushall' },
    {
      at,
      kind: 'slow-path',
      node,
      replica: int(r, 0, world.replicas - 1),
      ms: int(r, 500, 1500),
      hopMs: int(r, 1500, SLOW_HOP_MS[1]),
    },
  ];
  for (let i = 0; i < 4; i++) actions.push(request(at - 4, at, node, first));
  const peers = all.length > 0 ? world.nodes - 1 : 0;
  for (let i = 0; i <= world.maxLoadedAdapters * world.replicas + 1; i++)
    actions.push(request(at + 2000, at + 3500, (node + 1 + int(r, 0, peers - 1)) % world.nodes, others));
  world.spanMs = Math.max(world.spanMs, at + 3500);
  return actions;
}

/** The staggered cut-offs' share of the seeds that may draw them (node_ttl_ms 500, a budget of 3 or 6). */
const STAGGER_SHARE = 0.1;
/** Three cut-offs each past the previous one's node_ttl_ms and sweep fit in a few seconds at 500. */
const STAGGER_MAX_TTL_MS = 500;
/** A budget of 1000 is never reached: the shape could break nothing there. */
const STAGGER_MAX_BUDGET = 6;
/** What the staggered cut-offs leave out of their schedules: the faults of Redis and its links. */
const REDIS_FAULTS: ReadonlySet<Action['kind']> = new Set<FaultKind>(SHARED_STATE_FAULTS);
/** The world's poll round (world-timings.ts), whose expireLeases sweeps a node silent past node_ttl_ms from the count. */
const SWEEP_EVERY_MS = 1000;

/**
 * Nodes cut off from Redis one after another (found by review at 752c5d6: no schedule drawn
 * before reached it): the first spends the shared window's budget with cold requests, then is
 * cut off; each next is cut off once the previous one's silence passed node_ttl_ms and a poll
 * round swept it from the live-node count, and sends cold requests deciding alone. Read whole and
 * lower, the count would grow each later node's share: budget 6, three nodes, 6 + 3 + 6 cold
 * loads in one window, over the fleet bound of twice the budget. All heal together, once the
 * last node's requests have decided.
 */
function staggeredCutOffs(r: Random, world: WorldSettings): Action[] {
  const ttl = world.nodeTtlMs!;
  const budget = world.coldLoadsPerMinute;
  const nodes = Array.from({ length: world.nodes }, (_, i) => i);
  for (let i = nodes.length - 1; i > 0; i--) {
    const j = int(r, 0, i);
    [nodes[i], nodes[j]] = [nodes[j]!, nodes[i]!];
  }
  // Adapters in turn, the first node's, then the last's (whose share grows most), then the
  // middle one's: each cold unless the turn came round to one loaded before.
  const first = int(r, 0, world.adapters.length - 1);
  const turn = (k: number) => (k === 0 ? 0 : k === nodes.length - 1 ? budget : budget + (budget + 2) * k);
  const cold = (k: number, i: number, from: number, to: number): Action => ({
    at: int(r, from, to),
    kind: 'request',
    node: nodes[k]!,
    adapter: (first + turn(k) + i) % world.adapters.length,
    tokens: int(r, 1, 6),
    prompt: int(r, 10, 2000),
  });
  const actions: Action[] = [];
  // The first node's requests come first, so it spends the shared window's budget itself (a
  // node that spent from it has that much less of its share alone).
  for (let i = 0; i < budget; i++) actions.push(cold(0, i, 0, 20));
  // Each cut-off once the state is node_ttl_ms old (a whole count read), or the previous node
  // silent past node_ttl_ms, swept by a poll round and the count read by a heartbeat after.
  const cuts = [int(r, ttl + 200, ttl + 400)];
  while (cuts.length < nodes.length) cuts.push(cuts.at(-1)! + ttl + SWEEP_EVERY_MS + int(r, 200, 400));
  const heal = cuts.at(-1)! + int(r, 1000, 2000);
  nodes.forEach((node, k) => {
    actions.push({ at: cuts[k]!, kind: 'partition', node, ms: heal - cuts[k]! });
    // More than its share: some may find their adapter resident.
    if (k > 0) for (let i = 0; i < budget + 2; i++) actions.push(cold(k, i, cuts[k]! + 50, cuts[k]! + 600));
  });
  world.spanMs = Math.max(world.spanMs, cuts.at(-1)! + 700);
  return actions;
}

type ReplicaFaultKind = Exclude<Extract<Action, { replica: number }>['kind'], 'slow-path'>;

/** A fault of one replica, drawn from `rs` (the replica first, then the fault's own draws). */
function replicaFault(rs: Random, kind: ReplicaFaultKind, at: number, replicas: number): Action {
  const replica = int(rs, 0, replicas - 1);
  const pick = <T>(xs: readonly T[]): T => xs[int(rs, 0, xs.length - 1)]!;
  switch (kind) {
    case 'replica-restart':
      return { at, kind, replica, downMs: dur(rs, 0, 2000) };
    case 'replica-outage':
      return { at, kind, replica, ms: dur(rs, 500, 4000), mode: rs() < 0.5 ? 'hang' : 'error500' };
    case 'scrape':
      return { at, kind, replica, ms: dur(rs, 200, 4000), mode: pick(SCRAPE_FAULTS) };
    case 'slow-load':
      return { at, kind, replica, ms: dur(rs, 500, 4000), slowMs: dur(rs, 500, 5000) };
    case 'load-fail':
      return { at, kind, replica, count: int(rs, 1, 4), failure: pick(LOAD_FAILURES) };
  }
}
