/**
 * No process keeps a replica that left (docs/reliability.md, "no memory per replica ever seen"):
 * at the end of a run with configuration changes, past the time each departed replica is due
 * forgotten (dst/forget-check.ts `due`: its last configuration lapsed, the store's grace and a
 * retain period passed, and poll rounds after), no live process's current runtime names it in any
 * record but the bounded ones (dst/replica-records.ts walks them all, not a list of its maps).
 */
import { recordsNaming } from './replica-records';
import type { Violation, WorldView } from './invariants';
import type { NodeProcesses } from './node-processes';
import { procName } from './node-processes';

export const RECORDS_INVARIANT = 'no process keeps a record of a replica it forgot';

/** Every live process still naming a replica past its `due`, as one violation (undefined: none). */
export function auditProcesses(
  w: WorldView,
  nodes: NodeProcesses,
  due: ReadonlyMap<string, number>,
): Violation | undefined {
  const kept: string[] = [];
  // A runtime a lora-poller alone keeps on a state its router left polls what that state lists, no
  // router there to forget for it (docs/reliability.md, the record move; forget-check.ts too).
  const alone = nodes.pollerAloneSenders();
  for (const p of nodes.procs) {
    if (!p.alive) continue;
    // A replaced runtime (a `redis` record change) is dropped whole once drained: only the current one lives on.
    for (const rt of p.runtimes.filter((r) => r.successor === null && !alone.has(nodes.senderOf(r))))
      for (const [url, by] of due) {
        const paths = recordsNaming(rt, url);
        if (paths.length > 0)
          kept.push(
            `${procName(p)} keeps ${url} (due ${Math.round(by)} ms): ${paths.slice(0, 4).join('; ')}${paths.length > 4 ? ` (+${paths.length - 4})` : ''}`,
          );
      }
  }
  if (kept.length === 0) return undefined;
  return {
    invariant: RECORDS_INVARIANT,
    detail: `at ${Math.round(w.now)} ms, ${kept.join(' | ')}`,
    at: w.now,
    step: w.step,
  };
}
