/**
 * "A prefetch unloads an idle adapter only for a load it makes" (docs/reliability.md): a prefetch
 * that unloaded a victim to make room, then was refused by its budget, left a slot empty and an
 * adapter with demand gone for nothing, which a request for it must load again, cold. Read from
 * the calls each prefetch load sent (dst/calls-seen.ts `PrefetchEnsure`): judged when it ends.
 * Its other ends without a load call are by design: a request began waiting for room there (the
 * room is the request's), its runtime was replaced, the adapter became resident meanwhile, or
 * another node took the slot.
 */
import type { PrefetchEnsure } from './calls-seen';

export const PREFETCH_INVARIANT = 'a prefetch unloads an idle adapter only for a load it makes';

/** The prefetch loads judged so far (an index into `CallsSeen.prefetchEnsures`), and the check. */
export class PrefetchCheck {
  private judged = 0;

  /** Why the first prefetch load ended since the last call broke the rule (undefined: none did). */
  check(ensures: readonly PrefetchEnsure[]): string | undefined {
    // In order of their start; one under way waits (and those after it) until it ends.
    while (this.judged < ensures.length) {
      const e = ensures[this.judged]!;
      if (e.endedAt === undefined) return undefined;
      this.judged++;
      if (e.unloads > 0 && e.loads === 0 && e.error === 'OverBudget')
        return (
          `${e.proc}'s prefetch of ${e.adapter} on ${e.url} unloaded ${e.unloads} idle adapter(s), ` +
          `then its budget refused the load (ended at ${Math.round(e.endedAt)} ms)`
        );
    }
    return undefined;
  }
}
