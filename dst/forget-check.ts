/**
 * Replicas that leave the fleet are forgotten (docs/reliability.md), judged from the world's own
 * records in worlds whose router configurations change (dst/config-draw.ts): which
 * configurations Kong gave each node and when a worker last went through a superseded one
 * (NodeProcesses), the requests on each replica (RequestRouting `onReplica`), the calls each
 * replica saw (CallsSeen `lastCallAt`), and the modelled Redis's forgets and keys; never the
 * router's own claims.
 *
 * - Kept: a retain call never forgets a replica the current configuration of a live node on that
 *   state lists, nor one a superseded configuration lists that a worker used within the lapse
 *   (kong-pdk keeps an idle instance 60 s). Not held to: a node cut off, or on a state emptied or
 *   restored, within node_ttl_ms, the grace and a retain period (its claim lapsed by design: to the
 *   fleet a silent node is a dead one, and it claims again once back).
 * - Not under a lease: a retain call never forgets a replica an open lease is on, as the model counts
 *   them (each acquire, retake, release, expiry and prune), apart from the store's lease table its
 *   guard reads: a fresh record would count none of its requests.
 * - Forgotten: after the last run, a replica no live configuration lists, with nothing running on
 *   it, is called by no node once the lapse, the grace, a retain period and two poll rounds have
 *   passed since it was last listed, used or ran a request; and the state no longer keeps any key
 *   of it (every map of the modelled Redis walked for its URL).
 * The busy-unload check (dst/invariants.ts) judges a replica forgotten and listed again as any.
 */
import { MIN_LAPSE_MS } from '../src/fleet/node-claim';
import type { CallsSeen } from './calls-seen';
import type { Violation, WorldView } from './invariants';
import type { NodeProcesses } from './node-processes';
import type { RedisModel } from './redis-model';
import type { RequestRouting } from './request-routing';
import type { Schedule } from './schedule';
import type { Scheduler } from './scheduler';
import { NODE_TTL_MS, POLL_MS, POLL_TIMEOUT_MS, PROBE_MS } from './world-timings';

export const KEPT_INVARIANT = 'a replica a live configuration lists is never forgotten';
/** A fresh record would count none of its requests: an unload could be granted under them (docs/reliability.md). */
export const LEASED_INVARIANT = 'a replica a lease is open on is never forgotten';
export const FORGOTTEN_INVARIANT = 'a replica no configuration lists is forgotten, then called no more';

/** Clock skew (dst/schedule.ts draws up to 300 ms either way) and a trip or two. */
const SLACK_MS = 1000;

export interface ForgetGround {
  sched: Scheduler;
  world: Schedule['world'];
  nodes: NodeProcesses;
  redis: readonly RedisModel[];
  routing: RequestRouting;
  calls: CallsSeen;
  /** The world's replicas. */
  urls: readonly string[];
}

export class ForgetCheck {
  /** By database: the forgets judged so far. */
  private readonly judged = [0, 0];
  /** By node: the last step its link to Redis was cut or slow, or it decided alone. */
  private readonly unsureAt: number[];
  /** By replica URL: when the last current configuration of a live node listing it stopped (a change). */
  private readonly listedUntil = new Map<string, number>();

  constructor(private readonly g: ForgetGround) {
    this.unsureAt = Array.from({ length: g.world.nodes }, () => -Infinity);
  }

  /** The store's grace (FleetRuntime.forgetGraceMs) and the nodes' retain period in this world. */
  private graceMs(): number {
    return Math.max(this.g.world.nodeTtlMs ?? NODE_TTL_MS, this.g.world.leaseMaxAgeMs);
  }

  private retainEveryMs(): number {
    return this.g.world.configChanges?.retainEveryMs ?? 30_000;
  }

  /** Node `n`'s configuration changes from listing `before` (World calls it before NodeProcesses.changeConfig). */
  changing(before: readonly string[], after: readonly string[]): void {
    const now = this.g.sched.now();
    for (const u of before) if (!after.includes(u)) this.listedUntil.set(u, now);
  }

  /** After each step: the forgets since the last step, each against the configurations Kong gave. */
  afterStep(w: WorldView): Violation | undefined {
    const { nodes, redis } = this.g;
    for (const p of nodes.procs) {
      const f = nodes.linkFaults[p.node]!;
      const alone = p.alive && p.runtimes.some((rt) => rt.store.mode?.() === 'local');
      if (f.partitions > 0 || f.slow > 0 || alone) this.unsureAt[p.node] = w.now;
    }
    for (const [db, r] of redis.entries())
      for (; this.judged[db]! < r.forgotten.length; this.judged[db]!++) {
        const e = r.forgotten[this.judged[db]!]!;
        if (e.leased)
          return {
            invariant: LEASED_INVARIANT,
            detail: `db ${db}: ${e.url} forgotten at ${Math.round(e.at)} ms (retain of ${e.node}) with a lease open on it`,
            at: w.now,
            step: w.step,
          };
        const why = this.listedBy(db, e.url, e.at);
        if (why !== undefined)
          return {
            invariant: KEPT_INVARIANT,
            detail: `db ${db}: ${e.url} forgotten at ${Math.round(e.at)} ms (retain of ${e.node}) while ${why}`,
            at: w.now,
            step: w.step,
          };
      }
    return undefined;
  }

  /** Why `url` may not be forgotten on `db` at `at`: a live node there routes to it, sure of its claim. */
  private listedBy(db: number, url: string, at: number): string | undefined {
    const { nodes, redis } = this.g;
    // A node silent (to the fleet: dead) this recently may have lost its claim; a state emptied or
    // restored this recently may hold a spec whose claims it lost.
    const unsure =
      (this.g.world.nodeTtlMs ?? NODE_TTL_MS) + this.graceMs() + this.retainEveryMs() + PROBE_MS + SLACK_MS;
    const r = redis[db]!;
    if ([...r.resets, ...r.restores].some((t) => t > at - unsure)) return undefined;
    for (const p of nodes.procs) {
      if (!p.alive || p.db !== db || this.unsureAt[p.node]! > at - unsure) continue;
      // Registered by now (a process started, a configuration changed: its upsert on its way).
      if (p.startedAt > at - SLACK_MS) continue;
      const cur = nodes.current[p.node]!;
      if (nodes.listed[p.node]!.includes(url) && cur.since <= at - SLACK_MS)
        return `node ${p.node}'s configuration (__seq__ ${cur.seq}, since ${Math.round(cur.since)} ms) lists it`;
      // An old configuration runs where the registry sends it, from its own record: there while that
      // record's runtime is current (a record moved from, within the grace), else where its plugin's
      // newest runs unless the record was left (runtime-registry.ts `runtimeOf`). Counted on its
      // own state only, and only while the runtime it was registered on, or a successor on that
      // state, holds it: a record change to other state took its claim there (FleetRuntime.retire
      // adopts it; seed 3441398: node 1 back on db 0 by a move forgot a replica its configuration
      // of before the record change to db 1 listed, held on db 1). Else not judged (lenient).
      for (const c of nodes.oldConfigs)
        if (
          c.node === p.node &&
          c.gen === p.gen &&
          c.db === db &&
          !c.svc.runtime.leftSince() &&
          nodes.prefixDb.get(c.svc.runtime.current().leasePrefix) === db &&
          c.urls.includes(url) &&
          at - c.usedAt < MIN_LAPSE_MS - SLACK_MS
        )
          return `node ${p.node}'s superseded configuration (__seq__ ${c.seq}) lists it, used at ${Math.round(c.usedAt)} ms`;
    }
    return undefined;
  }

  /**
   * The replicas no live configuration lists, each with the time by which every node should have
   * stopped calling it and the state forgotten it (undefined: none, or something still runs there).
   */
  due(): Map<string, number> {
    const { nodes, redis, routing } = this.g;
    const out = new Map<string, number>();
    const live = nodes.procs.filter((p) => p.alive);
    const resets = redis.flatMap((r) => [...r.resets, ...r.restores]);
    for (const url of this.g.urls) {
      if (live.some((p) => nodes.listed[p.node]!.includes(url))) continue;
      const use = routing.onReplica.get(url);
      if (use && use.open > 0) continue;
      const since = Math.max(
        this.listedUntil.get(url) ?? 0,
        ...nodes.oldConfigs.filter((c) => c.urls.includes(url)).map((c) => c.usedAt),
        use?.endedAt ?? -Infinity,
        ...resets,
      );
      // Its last configuration lapses (a poll round after MIN_LAPSE_MS unused), the node tells the
      // store at once, the store forgets it at the next retain past the grace, and each node's next
      // round reads a list without it.
      out.set(
        url,
        since +
          MIN_LAPSE_MS +
          POLL_MS +
          this.graceMs() +
          this.retainEveryMs() +
          2 * POLL_MS +
          POLL_TIMEOUT_MS +
          SLACK_MS,
      );
    }
    return out;
  }

  /** At the end, past every `due`: the replicas forgotten, called no more, no key of them kept. */
  forgotten(w: WorldView, due: ReadonlyMap<string, number>): Violation | undefined {
    const { nodes, redis, calls } = this.g;
    const fail = (detail: string): Violation => ({
      invariant: FORGOTTEN_INVARIANT,
      detail,
      at: w.now,
      step: w.step,
    });
    const used = new Set(nodes.procs.filter((p) => p.alive).map((p) => p.db));
    // A runtime a node's lora-poller alone keeps on a state its router left polls what that state
    // lists (docs/reliability.md, the record move): no router there forgets for it.
    const alone = nodes.pollerAloneSenders();
    for (const [url, by] of due) {
      const senders = [...(calls.lastCallBy.get(url) ?? [])].filter(([sender]) => !alone.has(sender));
      const last = Math.max(-Infinity, ...senders.map(([, at]) => at));
      if (last > by)
        return fail(
          `${url}, listed by no configuration, called at ${Math.round(last)} ms (due ${Math.round(by)} ms)`,
        );
      for (const db of used) {
        const kept = keysOf(redis[db]!.state, url, w.now);
        if (kept.length > 0)
          return fail(
            `db ${db} keeps ${url} at ${Math.round(w.now)} ms (due ${Math.round(by)} ms): ${kept.slice(0, 3).join('; ')}`,
          );
      }
    }
    return undefined;
  }
}

/** Fields of the modelled server that are a log, not keys (the store's capped event list). */
const NOT_KEYS = new Set(['eventLog', 'claimsClock']);
/** The most objects one audit walks (the state of a schedule holds a few thousand). */
const WALK_BOUND = 200_000;

/**
 * Where `state` still names `url`: every Map key and value, Set member, array element and field
 * reachable from it (but its event log), as paths. A placement of a cold adapter (`place:<adapter>`
 * in Redis, a key with its own expiry) past its time is gone in Redis: skipped.
 */
export function keysOf(state: object, url: string, now: number): string[] {
  const found: string[] = [];
  const seen = new WeakSet<object>();
  let walked = 0;
  const visit = (v: unknown, path: string): void => {
    if (typeof v === 'string') {
      if (v === url || v.startsWith(`${url}\u0000`) || v.startsWith(`${url}/`)) found.push(path);
      return;
    }
    if (v === null || typeof v !== 'object' || typeof v === 'function' || seen.has(v)) return;
    if (++walked > WALK_BOUND) return;
    seen.add(v);
    if (v instanceof Map) {
      for (const [k, x] of v) {
        const expired =
          x !== null &&
          typeof x === 'object' &&
          'until' in x &&
          'claimers' in x &&
          (x as { until: number }).until <= now;
        if (expired) continue;
        visit(k, `${path}<key ${String(k).replace('\u0000', '\\0')}>`);
        visit(x, `${path}[${String(k).replace('\u0000', '\\0')}]`);
      }
      return;
    }
    if (v instanceof Set) {
      for (const x of v) visit(x, `${path}{}`);
      return;
    }
    if (v instanceof WeakMap || v instanceof WeakSet) return;
    if (Array.isArray(v)) {
      v.forEach((x, i) => visit(x, `${path}[${i}]`));
      return;
    }
    for (const [k, x] of Object.entries(v)) if (!NOT_KEYS.has(k)) visit(x, `${path}.${k}`);
  };
  visit(state, 'state');
  return found;
}
