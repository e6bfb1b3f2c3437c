/**
 * The randomized fault run's invariants, checked from the simulated replicas' own logs (what
 * each engine had running and waiting at an unload, how many adapters each registry held after
 * every load and unload) and, for leases, from Redis and each node after traffic stopped: never
 * from the router's counters. Pure functions over recorded data, so a unit test can feed them
 * logs that break each one.
 */
import type { AdapterLogEntry } from '../sim/http/replica';
import type { Span } from './alone';
import type { Witness } from './senders';
import { UNSEEN_HOLD_MS } from '../src/adapters/replica-word';

/** One entry of a replica's adapter log, with the replica it came from. */
export interface ReplicaLogEntry extends AdapterLogEntry {
  replica: string;
}

export interface Violation {
  /** Wall-clock Unix ms (the sim log's `wallMs`), when known. */
  at?: number;
  /** For a violation over a span: when it ended. */
  until?: number;
  replica?: string;
  adapter?: string;
  detail: string;
}

export interface InvariantResult {
  name: string;
  /** How many times the invariant was checked (log entries, windows, lease counts). */
  checks: number;
  violations: Violation[];
  /** (ii): the stretches over the limit its excuses covered, and the longest (ms). */
  excused?: { stretches: number; longestMs: number };
  /** (i): the busy unloads its one exemption allowed, each as a violation would read. */
  excusedUnloads?: Violation[];
}

/**
 * When (ii) allows an excess beyond its grace: while some node decides alone or a fault is under
 * way (`spans`), and for `afterMs` after each (a node back from an outage unloads nothing for two
 * probe intervals, then a poll trims the idle excess).
 */
export interface Excuses {
  spans: readonly Span[];
  afterMs: number;
}

/**
 * (i) No unload answered 200 while the engine had requests of that adapter running or waiting,
 * but for the window docs/reliability.md leaves open ("An adapter someone unseen routes is held",
 * not covered), the same rule as the simulation's (dst/request-routing.ts `unseenFirst`): read from
 * `witness`, an unload is excused only if every request of that adapter there under way at it was
 * routed by a node deciding alone, reached the replica after the unloading node last asked that
 * replica's `/metrics`, and was that node's first request of the adapter there or its first after
 * UNSEEN_HOLD_MS with none under way. Excused unloads are listed, not dropped.
 */
export function noBusyUnload(log: readonly ReplicaLogEntry[], witness?: Witness): InvariantResult {
  const r: InvariantResult = {
    name: `no unload of a busy adapter${witness ? " (but an unseen router's first request of it)" : ''}`,
    checks: 0,
    violations: [],
    excusedUnloads: [],
  };
  for (const e of log) {
    if (e.op !== 'unload' || e.status !== 200) continue;
    r.checks++;
    const running = e.running ?? 0;
    const waiting = e.waiting ?? 0;
    if (running + waiting === 0) continue;
    const v: Violation = {
      at: e.wallMs,
      replica: e.replica,
      adapter: e.name,
      detail: `unloaded with ${running} running and ${waiting} waiting`,
    };
    const why = witness ? unseenFirst(e, running + waiting, witness) : { excused: false, detail: '' };
    if (why.detail) v.detail += `: ${why.detail}`;
    (why.excused ? r.excusedUnloads! : r.violations).push(v);
  }
  return r;
}

/**
 * Whether the busy unload `e` (with `busy` requests under way) is the unseen router's first
 * request `noBusyUnload` excuses, and what the witness says of it either way.
 */
export function unseenFirst(
  e: ReplicaLogEntry,
  busy: number,
  w: Witness,
): { excused: boolean; detail: string } {
  const at = e.wallMs;
  if (at === undefined) return { excused: false, detail: 'no time recorded' };
  // The unload call that landed: one on this replica that reached it just before (its body, the
  // adapter's name, is not read by the witness); unloads from two nodes then leave it unknown.
  const calls = w.unloads.filter(
    (c) => c.replica === e.replica && c.at <= at && c.at >= at - SENDER_WITHIN_MS,
  );
  const call = latest(calls, () => true);
  if (!call || call.node < 0 || calls.some((c) => c.node !== call.node))
    return { excused: false, detail: 'its sender is not known' };
  const wordAt = latest(
    w.asks,
    (c) => c.replica === e.replica && c.node === call.node && c.at <= call.at,
  )?.at;
  // An ask from no known node after it may have been the unloading node's own, later word.
  const unknownAsk = w.asks.some(
    (c) => c.replica === e.replica && c.node < 0 && c.at > (wordAt ?? -Infinity) && c.at <= call.at,
  );
  if (unknownAsk)
    return {
      excused: false,
      detail: `node ${call.node} unloaded; a /metrics ask from no known node came after its last`,
    };
  const mine = w.requests.filter((q) => q.replica === e.replica && q.adapter === e.name);
  const open = mine.filter((q) => q.at <= at && q.ended > at);
  const said = (q: (typeof open)[number]) => {
    const before = mine.some(
      (p) => p !== q && p.node === q.node && p.at < q.at && p.ended > q.at - UNSEEN_HOLD_MS,
    );
    const ok = q.alone && wordAt !== undefined && q.at >= wordAt && !before;
    const facts = [
      `node ${q.node} ${q.alone ? 'alone' : 'on Redis'}`,
      `reached it ${wordAt === undefined ? '(no ask seen)' : `${q.at - wordAt} ms after the ask`}`,
      before ? `not its first in ${UNSEEN_HOLD_MS} ms` : 'its first',
    ];
    return { ok, text: facts.join(', ') };
  };
  const each = open.map(said);
  const detail =
    `node ${call.node} unloaded (its last /metrics ask ${wordAt === undefined ? 'not seen' : `${at - wordAt} ms before`}); ` +
    (open.length ? `under way: ${each.map((x) => x.text).join('; ')}` : 'no proxied request seen under way');
  // Every request the engine counted must be one the witness saw.
  return { excused: open.length === busy && each.every((x) => x.ok), detail };
}

/** How long before its log entry an unload call reached the replica (the body read between). */
const SENDER_WITHIN_MS = 1000;

/** The last item of `list` (in time order) that `ok` accepts. */
function latest<T extends { at: number }>(list: readonly T[], ok: (t: T) => boolean): T | undefined {
  let best: T | undefined;
  for (const t of list) if (ok(t) && (!best || t.at >= best.at)) best = t;
  return best;
}

/** How much of [from, until] no span (each stretched by `afterMs`) covers. */
function uncovered(from: number, until: number, e: Excuses): number {
  const spans = e.spans
    .filter((s) => s.from < until && s.to + e.afterMs > from)
    .map((s) => ({ from: Math.max(s.from, from), to: Math.min(s.to + e.afterMs, until) }))
    .sort((a, b) => a.from - b.from);
  let covered = 0;
  let at = from;
  for (const s of spans) {
    const start = Math.max(s.from, at);
    if (s.to > start) {
      covered += s.to - start;
      at = s.to;
    }
  }
  return until - from - covered;
}

/**
 * (ii) A replica's runtime-loaded adapters above `max` for no longer than `graceMs` (one poll
 * interval: a poll adopts a load that finished after its timeout, then the excess is trimmed),
 * not counting the time `excuses` cover (docs/reliability.md "Adapter slots": nodes deciding apart
 * can each fill the last slot, and a node deciding alone trims nothing). The count after each call
 * comes from the log; an excess still open at `endMs` counts up to it.
 */
export function loadedWithinLimit(
  log: readonly ReplicaLogEntry[],
  max: number,
  graceMs: number,
  endMs: number,
  excuses: Excuses = { spans: [], afterMs: 0 },
): InvariantResult {
  const r: InvariantResult = {
    name: `loaded adapters <= ${max} (beyond for at most ${graceMs} ms${excuses.spans.length ? `, or while a node decides alone or a fault is under way and ${excuses.afterMs} ms after` : ''})`,
    checks: 0,
    violations: [],
    excused: { stretches: 0, longestMs: 0 },
  };
  const byReplica = new Map<string, ReplicaLogEntry[]>();
  for (const e of log) {
    if (e.loaded === undefined || e.wallMs === undefined) continue;
    const list = byReplica.get(e.replica) ?? [];
    list.push(e);
    byReplica.set(e.replica, list);
  }
  for (const [replica, entries] of byReplica) {
    entries.sort((a, b) => a.wallMs! - b.wallMs!);
    let since: number | null = null;
    let peak = 0;
    const close = (until: number) => {
      const over = since !== null ? until - since : 0;
      const bare = since !== null ? uncovered(since, until, excuses) : 0;
      if (over > graceMs && bare > graceMs)
        r.violations.push({
          at: since!,
          until,
          replica,
          detail:
            `${peak} adapters loaded (limit ${max}) for ${over} ms` +
            (bare < over
              ? ` (${bare} ms of it with no node alone and no fault for ${excuses.afterMs} ms)`
              : ''),
        });
      else if (over > graceMs) {
        r.excused!.stretches++;
        r.excused!.longestMs = Math.max(r.excused!.longestMs, over);
      }
      since = null;
      peak = 0;
    };
    for (const e of entries) {
      r.checks++;
      if (e.loaded! > max) {
        since ??= e.wallMs!;
        peak = Math.max(peak, e.loaded!);
      } else close(e.wallMs!);
    }
    close(endMs);
  }
  return r;
}

/** One lease count read after the run: where, and how many were still open. */
export interface LeaseObservation {
  where: string;
  open: number;
  /** A few of the open leases as stored, to tell where they came from. */
  sample?: string[];
}

/** (iii) Every lease released once traffic stopped and the nodes settled. */
export function leasesReleased(observations: readonly LeaseObservation[]): InvariantResult {
  return {
    name: 'every lease released after the run',
    checks: observations.length,
    violations: observations
      .filter((o) => o.open !== 0)
      .map((o) => ({
        detail:
          o.open < 0
            ? `${o.where}: could not be read`
            : `${o.open} lease(s) open in ${o.where}${o.sample?.length ? `: ${o.sample.join(', ')}` : ''}`,
      })),
  };
}

/**
 * (iv) Cold loads within the budget plus one window: the budget counts in fixed windows of
 * `windowMs`, so any span of L ms overlaps at most max(1, ceil(L / window)) + 1 of them and may hold
 * `perWindow` loads for each. Every load call the replicas logged counts (a failed load was
 * spent too); one violation per load that begins a span holding more.
 */
export function coldLoadsWithinBudget(
  log: readonly ReplicaLogEntry[],
  perWindow: number,
  windowMs: number,
  /**
   * Wall-clock times at which the budget's store was emptied (FLUSHALL, a restart without
   * persistence, another database): each one in a span allows one more budget there. Empty for
   * the invariant; the report also shows the count with them, to tell resets from other excess.
   * An interval: a change to another database reaching the nodes in turn, the old and the new
   * state each keeping a window meanwhile; it allows one more budget to a span it overlaps.
   */
  resets: readonly (number | { from: number; to: number })[] = [],
): InvariantResult {
  const r: InvariantResult = {
    name: `cold loads <= ${perWindow} per ${windowMs / 1000} s window (+1 window${resets.length ? ', +1 budget per emptied store' : ''})`,
    checks: 0,
    violations: [],
  };
  if (perWindow <= 0) return r;
  // A load's spend comes before its call ends: the call's start is when it was answered minus its time.
  const starts = log
    .filter((e) => e.op === 'load' && e.wallMs !== undefined)
    .map((e) => e.wallMs! - e.ms)
    .sort((a, b) => a - b);
  for (let i = 0; i < starts.length; i++) {
    r.checks++;
    for (let j = i; j < starts.length; j++) {
      const span = starts[j]! - starts[i]!;
      // A span of 0 may still straddle a window's end: at least two windows.
      const emptied = resets.filter((t) =>
        typeof t === 'number'
          ? t >= starts[i]! && t <= starts[j]!
          : t.from <= starts[j]! && t.to >= starts[i]!,
      ).length;
      const allowed = perWindow * (Math.max(1, Math.ceil(span / windowMs)) + 1 + emptied);
      if (j - i + 1 > allowed) {
        r.violations.push({
          at: starts[i],
          until: starts[j],
          detail: `${j - i + 1} loads within ${Math.round(span)} ms (allowed ${allowed})`,
        });
        break;
      }
    }
  }
  return r;
}
