/**
 * An excess the trim cannot take yet: every adapter the replica holds has requests running or
 * waiting there. A trim unloads only idle adapters (docs/reliability.md, "A poll trims what got
 * past": "a busy excess stays until it is idle"), so a crowd keeping each adapter of an excess
 * busy keeps the replica over its limit for as long as it lasts (seed 6215: `team` and `team,a`
 * on a replica limited to 1, a crowd on both for 6.5 s).
 */
import type { EngineWord } from './comma-word';

/** Whether every adapter `w` holds is running or waiting: none idle, none the trim may take. */
export function excessAllBusy(w: EngineWord): boolean {
  const active = new Set([...w.running, ...w.waiting]);
  return w.loaded.length > 0 && w.loaded.every((n) => active.has(n));
}
