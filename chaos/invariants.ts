/**
 * The randomized fault run's invariants, checked from the simulated replicas' own logs (what
 * each engine had running and waiting at an unload, how many adapters each registry held after
 * every load and unload) and, for leases, from Redis and each node after traffic stopped: never
 * from the router's counters. Pure functions over recorded data, so a unit test can feed them
 * logs that break each one.
 */
import type { AdapterLogEntry } from '../sim/http/replica';
import type { Span } from './alone';

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

/** (i) No unload answered 200 while the engine had requests of that adapter running or waiting. */
export function noBusyUnload(log: readonly ReplicaLogEntry[]): InvariantResult {
  const r: InvariantResult = { name: 'no unload of a busy adapter', checks: 0, violations: [] };
  for (const e of log) {
    if (e.op !== 'unload' || e.status !== 200) continue;
    r.checks++;
    const running = e.running ?? 0;
    const waiting = e.waiting ?? 0;
    if (running + waiting > 0)
      r.violations.push({
        at: e.wallMs,
        replica: e.replica,
        adapter: e.name,
        detail: `unloaded with ${running} running and ${waiting} waiting`,
      });
  }
  return r;
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
