/**
 * The invariants of docs/reliability.md, checked after every step of a schedule from the
 * replicas' own adapter logs (what each engine had running and waiting at an unload, how many
 * adapters its registry held after each call), the modelled Redis and each node's wake-up
 * lists: never from the router's counters. The log-based ones are chaos/invariants.ts's
 * functions, fed incrementally.
 */
import {
  coldLoadsWithinBudget,
  noBusyUnload,
  type ReplicaLogEntry,
  type Violation as ChaosViolation,
} from '../chaos/invariants';
import type { AdapterLogEntry } from '../sim/http/replica';
import { COLD_LOAD_WINDOW_MS, FLEET_BUDGET_KEY } from '../src/router/cold-budget';
import type { BudgetOp } from './redis-model';
import { excessAllBusy } from './busy-excess';
import { excessReadBusy, type EngineWord } from './comma-word';
import { excessHeldByDead } from './orphan-hold';
import type { FailedLoad } from './replicas';
import { staticUnloaded } from './static-check';
import { roomOverMade } from './room-check';
import type { LoadClaim } from './room-making';
import { trimmedBelow, type RegistryLoss, type UnloadCall } from './trim-check';

export interface Violation {
  invariant: string;
  detail: string;
  /** Simulated ms and step when it was found. */
  at: number;
  step: number;
}

/**
 * A load's start read off its replica's log may round this far below the true instant: far above a
 * double's rounding at the simulation's times (an ulp of 10^6 ms is about 10^-10 ms), far below the
 * delays it models (a message arrives in the same instant or 1-2 ms later: dst/scheduler.ts `trip`).
 */
const ROUNDING_MS = 1e-6;

/** Found a violation: the schedule stops there. */
export class InvariantBroken extends Error {
  constructor(readonly v: Violation) {
    super(`${v.invariant}: ${v.detail} (t=${v.at} ms, step ${v.step})`);
  }
}

export interface LogSource {
  url: string;
  log: readonly AdapterLogEntry[];
  /** The replica's registry and engine now (dst/comma-word.ts), read only while it is over the limit. */
  word?: () => EngineWord;
  /** Adapters on the replica that an open lease of a process that died holds in the shared store (dst/orphan-hold.ts). */
  orphaned?: () => ReadonlySet<string>;
}

/** What the checks need to know of the world at a step. */
export interface WorldView {
  now: number;
  step: number;
  /** Whether any node decides alone now (Redis unreachable to it), or a fault is under way. */
  degraded: boolean;
  /** When the last fault began or healed (the world is quiet this long after). */
  lastFaultAt: number;
  /**
   * Times the shared state was emptied, and spans while a `redis` record change to other state
   * reached the nodes in turn (each allows one more budget, docs/reliability.md (iv)).
   */
  resets: readonly (number | { from: number; to: number })[];
  /** Of `resets`, those that may bring back state no call backs: restored from an older copy, record changes' spans. */
  restores?: readonly (number | { from: number; to: number })[];
  /** Whether a fault is under way now. */
  faultOpen?: boolean;
  /** Replica restarts that forgot adapters loaded at run time, and when a registry read first saw each. */
  registryLost?: readonly RegistryLoss[];
}

export interface Limits {
  maxLoadedAdapters: number;
  nodes: number;
  coldLoadsPerMinute: number;
  /** How long a replica may hold more than the limit once no node decides alone (a late load trimmed). */
  excessGraceMs: number;
  /** How long after a fault the world counts as quiet (one load per burst is checked then). */
  quietAfterMs: number;
  /** How long a load lock a reset of the shared state brought back may live (the trim check's excuse). */
  staleLockMs?: number;
  /**
   * Replicas by the budget that pays their cold loads, one group per shared state at a time (absent:
   * one fleet, one budget). With moves (dst/config-draw.ts), the moved record's replicas are the
   * other state's while the rest are this one's: two budgets at once, each its own window.
   */
  budgetGroups?: readonly (readonly string[])[];
}

/** A load call as a runtime sent it. */
export interface LoadCall {
  at: number;
  /** `at` on its sender's clock (skewed): the one its backoff runs on (none: true time). */
  clockAt?: number;
  url: string;
  name: string;
  /** The plugin-server process (node and generation): its budget share is its own. */
  proc: string;
  /** The runtime (its backoff is its own). */
  sender: string;
  /** Its store decided alone (Redis unreachable to it) when it sent the call. */
  alone: boolean;
  /** Some node decided alone or a fault was under way when it was sent (WorldView.degraded). */
  degraded?: boolean;
  /** The request whose decision sent it (none: not sent for a request). */
  request?: number;
  /** Sent by a prefetch tick (src/prefetch/), for no request. */
  prefetch?: true;
  /**
   * When its process had its request's cold-load spend granted (true time), and how: by Redis
   * (the answer back) or alone, from its share (none: no grant noted, or not sent for a request).
   */
  grant?: { at: number; alone: boolean };
  /**
   * When the router gave up on it (no answer: `load_timeout_ms`, a reset). It ended its lock,
   * the shared state says nothing loads there, yet the replica may go on and land it.
   */
  gaveUpAt?: number;
  /** When its sender had the answer or gave up (undefined: still waiting). */
  endedAt?: number;
  /** The replicas the configuration routing its request lists (none: not sent for a request). */
  listed?: readonly string[];
  /** When its request first won the adapter's placement on its replica (none: it never did). */
  placedAt?: number;
}

/**
 * A placement of a cold adapter claimed on `url` past the one the claimer saw on `past` (the
 * store's `seen`): a copy on purpose (that holder saturated, seen down, or unable to serve it).
 */
export interface PlacementSpread {
  at: number;
  adapter: string;
  url: string;
  past: string;
}

/** What the runtimes sent and what the fault layer failed (the per-node checks). */
export interface CallSource {
  loads: readonly LoadCall[];
  /** The load slots the shared store granted (the room check counts them as loads under way). */
  claims?: readonly LoadClaim[];
  /** Placements claimed past another (the one-load-per-burst check lets their loads overlap). */
  spreads?: readonly PlacementSpread[];
  failed: readonly FailedLoad[];
  /** The unload calls the runtimes sent (which trimmed: sent for no request). */
  unloads?: readonly UnloadCall[];
  /** When a request's decision ended (its route answered or threw; undefined: not yet). */
  decidedAt?: (request: number) => number | undefined;
  /** backoff_base_ms: a load that failed is not tried again by its runtime sooner. */
  backoffMs: number;
  /**
   * Requests of live processes routed to `adapter` on `replica` and not there yet (Kong's hop to it,
   * slow on a slow path): busy as if running, though the replica cannot report them.
   */
  onTheWay?: (replica: string, adapter: string) => number;
}

/** A request answered 429 for the fleet's cold-load budget: when, and which (arrival number). */
export interface BudgetRefusal {
  at: number;
  request: number;
}

/** What the budget check reads: the shared states' budget calls and the refusals clients got. */
export interface BudgetSource {
  /** Per shared state (database): its budget calls and slot claims as the server ran them. */
  ledgers: readonly (readonly BudgetOp[])[];
  refusals: readonly BudgetRefusal[];
  /** How a request's decision ended: its route answered, its process died, or not yet. */
  fate(request: number): 'answered' | 'died' | undefined;
}

/** A refusal by the shared window, judged once every request granted in that window is decided. */
interface Judged {
  refusal: BudgetRefusal;
  /** The window's start, server time (the spend that opened it). */
  from: number;
  /** The grants counted in that window before the refusal. */
  grants: Extract<BudgetOp, { op: 'spend' }>[];
  /** Spends counted there elsewhere first: a node's alone, or before an emptied store. */
  added: number;
}

/**
 * Whether `m`'s request was granted by Redis (its answer back) after `c`'s was granted alone: a
 * grant of the shared window its process had not had when it granted `c` from its share, which
 * counts the grants of the window so far (seed 487008: `c` granted at 1,824 ms, its call held until
 * 2,324 ms while Redis granted three more). A grant made alone after `c` still counts with it.
 */
function sharedSince(m: LoadCall, c: LoadCall): boolean {
  return m !== c && c.grant?.alone === true && m.grant?.alone === false && m.grant.at > c.grant.at;
}

/** Incremental checks over the replicas' logs: each entry is looked at once. */
export class LogChecks {
  private seen: number[];
  /** The load calls the budget charges (a request's first), as the replica log's entries. */
  private readonly charged: ReplicaLogEntry[] = [];
  /** Requests that sent a load call so far. */
  private readonly charging = new Set<number>();
  /** Per replica: since when it holds more than the limit, and whether some node decided alone meanwhile. */
  private over: ({ since: number; alone: boolean; blind: boolean } | null)[];
  /** Load calls under way, by adapter: [replica, start] (one load per burst). */
  private readonly loading = new Map<
    string,
    {
      url: string;
      start: number;
      end: number;
      quiet: boolean;
      gaveUpAt: number;
      prefetch: boolean;
      listed: readonly string[] | undefined;
      placed: number;
    }[]
  >();

  constructor(
    private readonly sources: LogSource[],
    private readonly limits: Limits,
    /**
     * Whether the unload of `adapter` on `replica` came from a node deciding alone (its after-load
     * undo): it cannot see requests other nodes route there, docs/reliability.md "What still
     * holds when Redis is lost for good"; or its requests there were an unseen router's first
     * (World.unseenFirst). Such an unload is not held to (i).
     */
    private readonly sentAlone: (replica: string, adapter: string) => boolean = () => false,
    private readonly calls: CallSource = { loads: [], failed: [], backoffMs: 0 },
    private readonly budget?: BudgetSource,
  ) {
    this.seen = sources.map(() => 0);
    this.over = sources.map(() => null);
  }

  check(w: WorldView): void {
    this.checkCalls(w);
    this.checkRefusals(w);
    this.sources.forEach((src, i) => {
      // Each entry once: most steps add none.
      for (let k = this.seen[i]!; k < src.log.length; k++) {
        const e = src.log[k]!;
        this.seen[i] = k + 1;
        this.entry(i, { ...e, replica: src.url, wallMs: e.at }, w);
      }
      const o = this.over[i];
      if (o) {
        o.alone ||= w.degraded;
        // The grace runs from when the replica's report stopped reading the idle excess busy through
        // a name with a comma: the router unloads nothing it reads busy (seed 111053).
        if (src.word && excessReadBusy(this.limits.maxLoadedAdapters, src.word())) o.since = w.now;
        // Nor while a dead process's lease holds the idle excess: it goes by age only (seed 102896).
        if (
          src.word &&
          src.orphaned &&
          excessHeldByDead(this.limits.maxLoadedAdapters, src.word(), src.orphaned())
        )
          o.since = w.now;
        // Nor while every adapter there is busy: a trim takes only idle ones (seed 6215).
        if (src.word && excessAllBusy(src.word())) o.since = w.now;
        if (!o.alone && w.now - o.since > this.limits.excessGraceMs)
          this.fail(
            w,
            'loaded adapters within max_loaded_adapters',
            `${src.url} over the limit for ${w.now - o.since} ms`,
          );
      }
    });
  }

  private callsSeen = 0;
  /** By process: its load calls, oldest first (the share check's window). */
  private readonly byProc = new Map<string, LoadCall[]>();

  /**
   * Each load call a runtime sent: (a) not within `backoffMs` of a load of the same adapter on the
   * same replica that failed for that runtime (docs/reliability.md, per-name state: "tried at most
   * once per (replica, adapter) per backoff window"), measured on the runtime's own clock as the
   * router measures it: a skew fault stepping that clock ahead mid-backoff shortens the backoff in
   * true time by the step (seed 134920; a real node's clock is monotonic within a process), and
   * from when the runtime heard the failure (seed 116306), unless its registry read after the
   * failure listed the adapter (the load landed to the router; seed 436555); (b)
   * sent deciding alone on a grant not Redis's (`grantedShared`), its process's load calls in the
   * last window (this one included, failed ones not; nor those Redis granted after this one's
   * grant, `sharedSince`) stay within the budget: a node cut off grants only what is left of its
   * share (issue 31 item 1f); (c) the fleet's load calls within the
   * budget plus one window (the fault run's (iv)). (b) and (c) count a request's first load call
   * only: the budget charges a request once however often it loads (seed 1076: one request's load
   * undone twice, an excess on a full replica, three calls on one grant).
   */
  private checkCalls(w: WorldView): void {
    const { loads, failed, backoffMs } = this.calls;
    for (; this.callsSeen < loads.length; this.callsSeen++) {
      const c = loads[this.callsSeen]!;
      const last = failed
        .filter((f) => f.sender === c.sender && f.url === c.url && f.name === c.name && f.at <= c.at)
        .at(-1);
      // From when its sender heard it, as the router starts the backoff: a trip after the answer
      // (seed 116306: a skew step back between the two).
      const since = last ? (c.clockAt ?? c.at) - (last.heardClockAt ?? last.clockAt) : Infinity;
      // Its sender's registry read after it listed the adapter: a landed load to the router, which
      // clears the backoff (docs/reliability.md "A load whose answer is lost is the replica's to
      // say too"; seed 436555: another node's load had landed there meanwhile).
      if (last && !last.listedAfter && since < backoffMs)
        this.fail(
          w,
          'a failed load is not tried again within the backoff',
          `${c.name} on ${c.url} by ${c.sender} ${since} ms after it failed there on its clock (${c.at - last.at} ms of true time)`,
        );
      // A request is charged once however often it loads (escalation after a failed or undone
      // load, docs/reliability.md "The cold-load budget"): its later calls spend nothing.
      if (c.request !== undefined && this.charging.has(c.request)) continue;
      if (c.request !== undefined) this.charging.add(c.request);
      this.charged.push({
        op: 'load',
        name: c.name,
        status: 0,
        ms: 0,
        at: c.at,
        wallMs: c.at,
        replica: c.url,
      });
      for (const group of this.limits.budgetGroups ?? [undefined]) {
        if (group && !group.includes(c.url)) continue;
        const charged = group ? this.charged.filter((e) => group.includes(e.replica!)) : this.charged;
        const budget = coldLoadsWithinBudget(charged, this.limits.coldLoadsPerMinute, 60_000, w.resets);
        if (budget.violations.length > 0)
          this.fail(w, 'cold loads within the budget per window', describe(budget.violations[0]!));
      }
      const mine = this.byProc.get(c.proc) ?? [];
      const recent = mine.filter((m) => c.at - m.at < 60_000);
      recent.push(c);
      this.byProc.set(c.proc, recent);
      // With moves, a node's runtimes on two states each grant from their own state's budget and
      // share (a move replaces no runtime, so carries no grants: docs/reliability.md "The cold-load
      // budget", per shared state); each judged against its group, as the fleet's budget above
      // (seeds 3434914, 3441001: loads on one state before a move, then alone on the moved record's).
      const group = this.limits.budgetGroups?.find((g) => g.includes(c.url));
      const counted = recent.filter(
        (m) =>
          (!group || group.includes(m.url)) &&
          !failed.some(
            (f) => f.sender === m.sender && f.url === m.url && f.name === m.name && f.at >= m.at,
          ) &&
          !sharedSince(m, c),
      );
      if (c.alone && !this.grantedShared(c.request) && counted.length > this.limits.coldLoadsPerMinute)
        this.fail(
          w,
          'a node deciding alone grants only what is left of its share',
          `${c.proc} sent ${counted.length} load calls in 60 s (budget ${this.limits.coldLoadsPerMinute}), the last deciding alone: ${c.name} on ${c.url}`,
        );
    }
  }

  /**
   * Whether Redis granted `request`'s spend of the fleet's budget and the router had the answer:
   * a grant of the shared window, not of the node's share, even if the node decides alone by the
   * time it sends the load call (seed 179824: granted at 1,304 ms, sent at 1,809 ms over a slow
   * link; Redis's window had granted it again after a Sentinel switch lost an earlier spend).
   */
  private grantedShared(request: number | undefined): boolean {
    if (request === undefined || !this.budget) return false;
    return this.budget.ledgers.some((ledger) =>
      ledger.some(
        (op) =>
          op.op === 'spend' &&
          op.key === FLEET_BUDGET_KEY &&
          op.request === request &&
          op.waitMs === 0 &&
          op.delivered,
      ),
    );
  }

  private refusalsSeen = 0;
  /** Refusals by the shared window whose grants are not all decided yet. */
  private judging: Judged[] = [];

  /**
   * The budget goes to loads: a request refused 429 for the fleet's budget by the shared window
   * (a fixed window in Redis time, opened by its first spend: scripts/budget.ts, the memory
   * store's `spendBudget`) had at least `cold_loads_per_minute` spends in that window before it
   * that went to a load. Judged once every request granted there has decided. A grant counts
   * when its request sent a load call (failed or undone ones too), or claimed a slot for it
   * (`beginLoad`: another node may have taken the slot first, or the access phase ran out before
   * the call; or the call failed on the link and the node claimed alone, seed 531770), or its
   * process died, or the grant's answer never reached the router (a slow reply: Redis counted it,
   * the router decided alone). Spends added to the window by a node (granted
   * while it decided alone, or re-published after an emptied store) count as spent; units given
   * back to the window (a prefetch's, whose load was never called) as not spent, unless the state
   * lost the refund since (a Sentinel switch that missed the write: the window counts them again). A refusal
   * by a node deciding alone (its share: a sliding 60 s on its own clock, of a node count the
   * checks do not know) is not judged.
   */
  private checkRefusals(w: WorldView): void {
    const b = this.budget;
    if (!b) return;
    for (; this.refusalsSeen < b.refusals.length; this.refusalsSeen++) {
      const refusal = b.refusals[this.refusalsSeen]!;
      const judged = this.sharedRefusal(b, refusal);
      if (judged) this.judging.push(judged);
    }
    if (this.judging.length === 0) return;
    this.judging = this.judging.filter((j) => !this.judge(b, j, w));
  }

  /** The shared window that refused `refusal`'s request, or null if it was refused alone. */
  private sharedRefusal(b: BudgetSource, refusal: BudgetRefusal): Judged | null {
    let last: { ledger: readonly BudgetOp[]; i: number } | null = null;
    for (const ledger of b.ledgers)
      for (let i = ledger.length - 1; i >= 0; i--) {
        const op = ledger[i]!;
        if (op.op !== 'spend' || op.key !== FLEET_BUDGET_KEY || op.request !== refusal.request) continue;
        if (!last || op.at > last.ledger[last.i]!.at) last = { ledger, i };
        break;
      }
    const spend = last?.ledger[last.i];
    // Granted by Redis (its answer late: the router decided alone), or never asked there.
    if (!last || spend?.op !== 'spend' || spend.waitMs === 0) return null;
    // Times are fractional ms: the spend that opened the window may sit a rounding error before it.
    const from = spend.at + spend.waitMs - COLD_LOAD_WINDOW_MS - 1e-6;
    const grants: Judged['grants'] = [];
    let added = 0;
    for (let i = 0; i < last.i; i++) {
      const op = last.ledger[i]!;
      if (op.op === 'claim' || op.key !== FLEET_BUDGET_KEY || op.at < from) continue;
      if (op.op === 'add') added += op.count;
      // A unit given back is a grant that went to no load (a prefetch's: it has no request).
      // Not one the state lost since (a switch, an older snapshot): Redis counts its units again.
      else if (op.op === 'refund') added -= op.lost ? 0 : op.count;
      else if (op.waitMs === 0) grants.push(op);
    }
    return { refusal, from, grants, added };
  }

  /** Judges `j` if every request granted in its window has decided: true when done. */
  private judge(b: BudgetSource, j: Judged, w: WorldView): boolean {
    const unused: number[] = [];
    for (const g of j.grants) {
      if (!g.delivered || g.request === undefined) continue;
      const fate = b.fate(g.request);
      if (fate === undefined) return false;
      if (fate === 'died' || this.calls.loads.some((c) => c.request === g.request)) continue;
      const claimed = b.ledgers.some((l) =>
        l.some((op) => op.op === 'claim' && op.request === g.request && op.at >= g.at),
      );
      if (!claimed) unused.push(g.request);
    }
    const counted = j.grants.length - unused.length + j.added;
    if (counted < this.limits.coldLoadsPerMinute)
      this.fail(
        w,
        'the cold-load budget goes to loads',
        `request ${j.refusal.request} refused 429 at ${Math.round(j.refusal.at)} ms by the window from ` +
          `${Math.round(j.from)} ms (budget ${this.limits.coldLoadsPerMinute}): ${j.grants.length} grant(s), ` +
          `${j.added} added, requests ${unused.join(', ')} granted with no load nor slot claimed`,
      );
    return true;
  }

  private entry(i: number, e: ReplicaLogEntry, w: WorldView): void {
    const busy = noBusyUnload([e]);
    if (busy.violations.length > 0 && !this.sentAlone(e.replica, e.name))
      this.fail(w, 'no unload of a busy adapter', describe(busy.violations[0]!));
    // Their leases hold the adapter in the store; the replica's word before the unload cannot.
    const coming =
      e.op === 'unload' && e.status === 200 ? (this.calls.onTheWay?.(e.replica, e.name) ?? 0) : 0;
    if (coming > 0 && !this.sentAlone(e.replica, e.name))
      this.fail(
        w,
        'no unload of a busy adapter',
        `${e.name} unloaded from ${e.replica} at ${Math.round(e.at)} ms with ${coming} request(s) routed to it on their way`,
      );
    if (e.op === 'load') this.load(e, w);
    const unloadedStatic = staticUnloaded(e, e.replica);
    if (unloadedStatic) this.fail(w, 'static adapters stay', unloadedStatic);
    if (e.op === 'unload' && e.status === 200 && e.loaded !== undefined) {
      const u = { url: e.replica, name: e.name, at: e.at, ms: e.ms, loaded: e.loaded };
      const below = trimmedBelow(u, this.limits.maxLoadedAdapters, this.calls, w, this.limits.staleLockMs);
      if (below) this.fail(w, 'a trim takes a replica down to its limit, not below', below);
      const overMade = roomOverMade(u, this.limits.maxLoadedAdapters, this.calls, w, this.limits.staleLockMs);
      if (overMade) this.fail(w, 'a request makes room for its load and no more', overMade);
    }
    if (e.loaded !== undefined) {
      const max = this.limits.maxLoadedAdapters;
      if (e.loaded > max) {
        const o = (this.over[i] ??= { since: w.now, alone: w.degraded, blind: false });
        // A load decided while some node decided alone or a fault was under way: its sender could not
        // see loads under way elsewhere, nor they it, and each view fills the replica up to the limit
        // with its own loads (docs/reliability.md, "Redis stopped mid-run": loads under way at once can
        // pass the limit). Seed 102680: slow loads on replica-1 sent by two nodes cut off and a
        // runtime on a new database, two each, landed together: 6 for a limit of 2.
        if (e.op === 'load' && this.decidedDegraded(e)) o.blind = true;
        // Otherwise each node's registry read before a load sees the others' landed loads: only
        // loads under way at once pass the limit, at most one per node.
        if (!o.blind && e.loaded > max + this.limits.nodes)
          this.fail(
            w,
            'loaded adapters within max_loaded_adapters',
            `${e.replica} holds ${e.loaded} (limit ${max})`,
          );
      } else this.over[i] = null;
    }
  }

  /** Whether the load call answered by `e` was sent while the world was degraded (its sender's view then). */
  private decidedDegraded(e: ReplicaLogEntry): boolean {
    const c = this.lastLoadCall(e, e.at);
    return c !== undefined && (c.degraded === true || c.alone);
  }

  private lastLoadCall(e: ReplicaLogEntry, by: number): LoadCall | undefined {
    const loads = this.calls.loads;
    for (let k = loads.length - 1; k >= 0; k--) {
      const c = loads[k]!;
      if (c.url === e.replica && c.name === e.name && c.at <= by) return c;
    }
    return undefined;
  }

  private load(e: ReplicaLogEntry, w: WorldView): void {
    // One load per cold adapter per burst while Redis answers everyone: no two load calls of one
    // adapter on two replicas at once.
    // An answer at once loaded nothing: the replica refused the call before loading (seed 129648:
    // "already loaded" on replica-1, where a load given up on had landed, beside a copy elsewhere).
    if (e.status !== 200 && e.ms === 0) return;
    const start = e.at - e.ms;
    const began = this.beganBy(e);
    // A load its sender decided alone is nobody's to join, however late it reaches the replica
    // (seed 751278: sent at 1,822 ms, begun at 4,114 ms after a slow path, the world quiet by then).
    // Nor one begun while a record change to other state moves the nodes in turn (its span in
    // `resets`): a node on the old state and one on the new see neither's lock (seed 1313402: the
    // nodes moved 3,113 ms apart, `geo` loaded from each state past the quiet after the change began).
    const split = w.resets.some((r) => typeof r !== 'number' && r.from <= start && start <= r.to);
    const quiet =
      !w.degraded && !split && start - w.lastFaultAt > this.limits.quietAfterMs && began?.alone !== true;
    const others = (this.loading.get(e.name) ?? []).filter((l) => l.end > start - 60_000);
    // Both decided while Redis answered everyone: a load begun during a fault (decided alone,
    // perhaps given up on at load_timeout_ms while the replica went on) is nobody's to join;
    // so is one the router gave up on before the other began, fault or not (seed 2300: a
    // replica running its loads one by one answered a third after 4 s, a load timeout of 3 s).
    // Nor is a copy a router placed past the other's placement on purpose (docs/routing.md: a
    // node that sees the placement and picks another replica spreads the adapter, and may; seed
    // 719 at node_ttl_ms 500: the placed replica, a request queued there, predicted 1,385 ms
    // against 1,086 for a copy, past the 250 ms margin).
    const gaveUp = began?.gaveUpAt ?? Infinity;
    // Nor is a prefetch's load: it makes copies in proportion to demand on purpose, one a replica,
    // a load under way counted as a copy (src/prefetch/planner.ts; seed 233: code loading for a
    // request on replica-1, a prefetch's second copy on replica-0 at hysteresis 0).
    // The call that began the load, not the last one before it landed: a request's call sent while
    // a prefetch's load was under way there (its lock past its TTL) is answered by that same load
    // (seed 1332358: `team` begun on replica-1 by a prefetch at 1,028 ms, landed at 4,599 ms, taken
    // for the load of a request that sent one at 4,038 ms).
    const prefetch = began?.prefetch === true;
    if (quiet && e.status === 200 && !prefetch)
      for (const l of others)
        if (
          l.quiet &&
          !l.prefetch &&
          l.url !== e.replica &&
          l.end > start &&
          !(l.gaveUpAt <= start) &&
          !(gaveUp <= l.start) &&
          !this.spreadPast(e.name, e.replica, l.url, start) &&
          !this.spreadPast(e.name, l.url, e.replica, l.start) &&
          !unlisted({ url: e.replica, placed: began?.placedAt ?? start, listed: began?.listed }, l)
        )
          this.fail(
            w,
            'each cold adapter loaded once per burst',
            `${e.name} loading on ${l.url} and ${e.replica} at once`,
          );
    others.push({
      url: e.replica,
      start,
      end: e.at,
      quiet,
      gaveUpAt: gaveUp,
      prefetch,
      listed: began?.listed,
      placed: began?.placedAt ?? start,
    });
    this.loading.set(e.name, others);
  }

  /** Whether a router placed `adapter` on `url` past its placement on `past`, in the minute before `by`. */
  private spreadPast(adapter: string, url: string, past: string, by: number): boolean {
    return (this.calls.spreads ?? []).some(
      (s) => s.adapter === adapter && s.url === url && s.past === past && s.at <= by && s.at > by - 60_000,
    );
  }

  /**
   * The load call that began the load `e` answers: the last one of its adapter to its replica sent
   * by the time the replica began it. That time is the log's less the load's length, which can round
   * a hair below the instant the replica began it, the very instant the call was sent when no hop
   * delays it (seed 1962793: a prefetch's call sent at 1,022.4040995389224 ms, its load logged at
   * 2,522.4040995389223 ms after 1,500 ms, begun so at 1,022.4040995389223): the call was missed
   * and the prefetch's copy taken for a request's second cold load.
   */
  private beganBy(e: ReplicaLogEntry): LoadCall | undefined {
    return this.lastLoadCall(e, e.at - e.ms + ROUNDING_MS);
  }

  /** Whether a replica holds more than the limit now (its grace may still be running). */
  overLimit(): boolean {
    return this.over.some((o) => o !== null);
  }

  fail(w: WorldView, invariant: string, detail: string): never {
    throw new InvariantBroken({ invariant, detail, at: w.now, step: w.step });
  }
}

/**
 * Whether the later placed of two loads of one adapter (placed: when its request won the
 * placement there, else when the load began) was sent for a request whose routing configuration
 * does not list the other's replica: it could not join it there (a node routes only to the
 * replicas its configuration lists, and follows no placement elsewhere: src/router/placement.ts).
 * Seed 2855225: a worker on the new configuration, replica-1 only, beside one on the previous
 * configuration loading on replica-0. Seed 2883001: a request placed on replica-1 since 4,052 ms,
 * waiting for room there, loads after one whose configuration lists replica-0 only began there.
 */
function unlisted(
  a: { url: string; placed: number; listed?: readonly string[] | undefined },
  b: { url: string; placed: number; listed?: readonly string[] | undefined },
): boolean {
  const [first, later] = a.placed >= b.placed ? [b, a] : [a, b];
  return later.listed !== undefined && !later.listed.includes(first.url);
}

function describe(v: ChaosViolation): string {
  return [v.replica, v.adapter, v.detail].filter((x) => x !== undefined).join(' ');
}
