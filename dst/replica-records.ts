/**
 * Where this process still names a replica: every record reachable from a runtime (its claim,
 * poller, adapter manager, work model, metrics, local store, replica calls...) and the
 * process-wide per-replica counts (src/lease.ts, src/router/in-flight-here.ts). Once a replica
 * left and its records were dropped (runtime-departures.ts `forgetReplica`), nothing but the
 * bounded records in `BOUNDED` may name it: the project keeps no memory per replica ever seen.
 *
 * A walk of the objects, not a list of the maps: a per-replica map added later is audited without
 * anyone remembering to list it. Out of the request path (the simulation asks it at the end of a
 * run, dst/process-audit.ts); it costs the runtime's objects, a few thousand, once.
 */
import { LeaseHandle } from '../src/lease';
import { joinsOn } from '../src/router/in-flight-here';
import type { FleetRuntime } from '../src/runtime';

/**
 * Records that may still name a replica that left, each bounded by a small constant whatever the
 * fleet's history, and why it is kept: a walk's path ending in one of these is not gone into.
 */
export const BOUNDED: readonly { path: string; why: string }[] = [
  {
    path: 'local.eventLog',
    why: "the placement page's recent fleet events, the last EVENT_LIMIT (src/fleet/memory-store.ts)",
  },
  {
    path: 'replicaWord.logged',
    why: 'the last 1024 (replica, adapter) pairs logged busy, so each is logged once (Lru of 1024)',
  },
  {
    path: 'replicaWord.servedEnds',
    why: 'the served requests of the last 1024 (replica, adapter) pairs (Lru of 1024)',
  },
  {
    path: 'api.http.targets',
    why: 'each URL called cut into origin and path, all cut again past TARGETS_MAX (src/backends/http.ts)',
  },
  {
    path: 'api.lastRead',
    why: "each vLLM replica's last answers, cleared past LAST_READ_MAX (src/backends/http-replica-api.ts)",
  },
];

/** Fields of a runtime that are not its records: other runtimes, the clock and logger, the shared state. */
const NOT_RECORDS = new Set(['clock', 'log', 'successor', 'predecessors', 'random']);

/** The most objects one audit walks (a runtime of the simulation holds a few thousand). */
const WALK_BOUND = 500_000;

/**
 * Whether `s` names `url`: is it, or holds it whole (a composite key, a label set, a URL under
 * it), not a longer address it is the start of (`http://a:80` in `http://a:8000`).
 */
export function names(s: string, url: string): boolean {
  // A letter, a digit, '_', '.', ':' or '-' right after: another host or port.
  for (let i = s.indexOf(url); i >= 0; i = s.indexOf(url, i + 1))
    if (!/[\w.:-]/.test(s[i + url.length] ?? '')) return true;
  return false;
}

/**
 * The records of `rt` (and of this process for `rt`) that name `url`, as paths from `rt`; the
 * bounded ones (`BOUNDED`) left out unless `withBounded`. The shared state (Redis: `store.shared`)
 * is not this process's and is not walked.
 */
export function recordsNaming(rt: FleetRuntime, url: string, withBounded = false): string[] {
  const found: string[] = [];
  if (LeaseHandle.countsOn(rt, url)) found.push('lease.ts openPerReplica');
  if (joinsOn(rt, url)) found.push('in-flight-here.ts joining');
  const shared = (rt.store as { shared?: object }).shared;
  const skip = new Set<unknown>([shared]);
  const seen = new WeakSet<object>();
  let walked = 0;
  const visit = (v: unknown, path: string): void => {
    if (typeof v === 'string') {
      if (names(v, url)) found.push(path);
      return;
    }
    if (v === null || typeof v !== 'object' || seen.has(v) || skip.has(v)) return;
    if (++walked > WALK_BOUND) return;
    if (!withBounded && BOUNDED.some((b) => path.endsWith(`.${b.path}`))) return;
    seen.add(v);
    if (v instanceof Map) {
      for (const [k, x] of v) {
        const at = typeof k === 'string' ? k.replaceAll('\u0000', '\\0') : typeof k;
        visit(k, `${path}<key ${at}>`);
        visit(x, `${path}[${at}]`);
      }
      return;
    }
    if (v instanceof Set) {
      for (const x of v) visit(x, `${path}{}`);
      return;
    }
    if (v instanceof WeakMap || v instanceof WeakSet || v instanceof Promise || ArrayBuffer.isView(v)) return;
    if (Array.isArray(v)) {
      v.forEach((x, i) => visit(x, `${path}[${i}]`));
      return;
    }
    for (const [k, x] of Object.entries(v)) {
      if (path === 'rt' && NOT_RECORDS.has(k)) continue;
      visit(x, `${path}.${k}`);
    }
  };
  visit(rt, 'rt');
  return found;
}
