/**
 * An excess the trim cannot reach: an idle adapter held in the shared store by the lease of a
 * plugin-server process that died. Its log phase never comes, and the lease goes by age only
 * (`lease_max_age_ms`, renewed by any request for the adapter there: docs/reliability.md, "A
 * lease whose log phase never came is reclaimed, and only then"), so the trim, which unloads
 * nothing a lease holds, waits for it (seed 102896).
 */
import type { EngineWord } from './comma-word';

/**
 * Whether a replica past `max` holds fewer idle adapters free of a dead process's lease than its
 * excess, some idle one being held by such a lease (`orphaned`). An excess really busy is no excuse.
 */
export function excessHeldByDead(max: number, w: EngineWord, orphaned: ReadonlySet<string>): boolean {
  const active = new Set([...w.running, ...w.waiting]);
  const idle = w.loaded.filter((n) => !active.has(n));
  const free = idle.filter((n) => !orphaned.has(n));
  return free.length < idle.length && free.length < w.loaded.length - max;
}
