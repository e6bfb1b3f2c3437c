/**
 * "A runtime every plugin left makes no call to its replicas past the grace" (docs/reliability.md,
 * the `redis` record sections): once every plugin of a node (its lora-router and, a plugin of its
 * own, its lora-poller) is on records of other state, and no configuration of the state it left
 * was used since (a stale worker's request, an old-config instance's log phase), the runtime there
 * retires after the lapse grace and the poll round that finds it empty (runtime-registry.ts
 * `retireIfLeft`). Judged from the world's own records: where Kong put each plugin (the actions),
 * when each old configuration was used (node-processes.ts `OldConfig.usedAt`) and the last call
 * each runtime sent a replica (calls-seen.ts `lastBySender`); never from the registry's state.
 */
import { MIN_LAPSE_MS } from '../src/fleet/node-claim';
import type { Violation } from './invariants';
import type { NodeProcesses, Process } from './node-processes';
import { POLL_MS, POLL_TIMEOUT_MS } from './world-timings';

export const LEFT_INVARIANT = 'a runtime every plugin left makes no call to its replicas past the grace';

/**
 * Past the grace: the poll round that lapses the last configuration and finds the runtime empty
 * (one interval, its jitter), a poll under way then (its timeout), a node's clock skew (300 ms at
 * most) and the lapse read on the node's monotonic clock.
 */
const SLACK_MS = 2 * POLL_MS + POLL_TIMEOUT_MS;

/** By live process: since when no plugin of its node is on each state (absent: one is, or was never off). */
export class LeftStates {
  private readonly since = new WeakMap<Process, Map<number, number>>();

  /** Process `p`'s plugins are on states `on` now (world time `now`). */
  note(p: Process, on: ReadonlySet<number>, now: number): void {
    let m = this.since.get(p);
    if (!m) this.since.set(p, (m = new Map()));
    for (const db of [0, 1])
      if (on.has(db)) m.delete(db);
      else if (!m.has(db)) m.set(db, now);
  }

  /**
   * By live process and state it has a runtime on but no plugin: the time from which none of its
   * runtimes there may call a replica.
   */
  due(nodes: NodeProcesses): { p: Process; db: number; by: number }[] {
    const out: { p: Process; db: number; by: number }[] = [];
    for (const p of nodes.procs) {
      if (!p.alive) continue;
      for (const [db, leftAt] of this.since.get(p) ?? []) {
        if (!p.runtimes.some((rt) => nodes.prefixDb.get(rt.leasePrefix) === db)) continue;
        const used = nodes.oldConfigs
          .filter((c) => c.node === p.node && c.gen === p.gen && c.db === db)
          .map((c) => c.usedAt);
        out.push({ p, db, by: Math.max(leftAt, ...used) + MIN_LAPSE_MS + SLACK_MS });
      }
    }
    return out;
  }

  /** The first runtime that called a replica past its due time (`lastBySender`: by sender, the last call's time and replica). */
  judge(
    nodes: NodeProcesses,
    lastBySender: ReadonlyMap<string, { at: number; url: string }>,
    now: number,
    step: number,
  ): Violation | undefined {
    for (const { p, db, by } of this.due(nodes)) {
      if (now < by) continue;
      for (const rt of p.runtimes) {
        if (nodes.prefixDb.get(rt.leasePrefix) !== db) continue;
        const last = lastBySender.get(nodes.senderOf(rt));
        if (last && last.at > by)
          return {
            invariant: LEFT_INVARIANT,
            detail: `node ${p.node}'s runtime ${nodes.senderOf(rt)} on db ${db}, which every plugin of the node left (due quiet by ${Math.round(by)} ms), called ${last.url} at ${Math.round(last.at)} ms`,
            at: now,
            step,
          };
      }
    }
    return undefined;
  }
}
