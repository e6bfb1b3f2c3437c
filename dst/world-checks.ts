/**
 * The checks the world runs after every step: the replicas' logs and the calls seen
 * (dst/invariants.ts LogChecks), the `max_in_flight` bound, the lock ends a retired runtime owes,
 * the registration passes, a prefetch's unloads, a second release, the gateway's held count, and bounded memory. Each
 * reads the world, never the router's own counters (save where said).
 */
import { LOCK_MARGIN_MS } from '../src/adapters/idle-unload';
import type { FleetRuntime } from '../src/runtime';
import { BOUND_INVARIANT } from './bound-check';
import type { CallsSeen } from './calls-seen';
import { InvariantBroken, LogChecks, type Violation, type WorldView } from './invariants';
import { firstSecondRelease } from './lease-watch';
import type { NodeProcesses } from './node-processes';
import { owedEndHeld, OWED_ENDS_INVARIANT } from './owed-ends-check';
import type { RedisModel } from './redis-model';
import { PrefetchCheck, PREFETCH_INVARIANT } from './prefetch-check';
import { PASSES_INVARIANT } from './registration-passes';
import type { ReplicaSet } from './replicas';
import type { RequestRouting } from './request-routing';
import type { Schedule } from './schedule';
import type { Scheduler } from './scheduler';
import {
  BACKOFF_BASE_MS,
  LOAD_TIMEOUT_MS,
  NODE_TTL_MS,
  POLL_MS,
  PROBE_MS,
  REDIS_DOWN_MAX_MS,
  TIMER_BOUND,
  WAKEUP_SLACK,
} from './world-timings';

/** What the checks read. */
export interface CheckGround {
  sched: Scheduler;
  world: Schedule['world'];
  replicas: ReplicaSet;
  redis: readonly RedisModel[];
  nodes: NodeProcesses;
  calls: CallsSeen;
  routing: RequestRouting;
  /** When the last fault began or healed. */
  lastFaultAt(): number;
}

/**
 * Whether the last unload of `adapter` on `replica` is not held to (i): its sender decided alone,
 * or the requests there were an unseen router's first (RequestRouting.unseenFirst).
 */
export function unloadExcused(
  calls: CallsSeen,
  routing: RequestRouting,
  replica: string,
  adapter: string,
): boolean {
  return (
    calls.unloaders.get(`${replica}\u0000${adapter}`)?.alone === true || routing.unseenFirst(replica, adapter)
  );
}

export class StepChecks {
  readonly log: LogChecks;
  /**
   * By runtime: the last step after which its store decided alone (the answer check). Each of a
   * process's runtimes: one a same-state record change replaced still decides the requests under
   * way on it (seed 525755).
   */
  private readonly localAt = new WeakMap<FleetRuntime, number>();
  private readonly prefetch = new PrefetchCheck();

  constructor(private readonly g: CheckGround) {
    const { world: w, replicas, redis, nodes, calls, routing } = g;
    const excused = (replica: string, adapter: string) => unloadExcused(calls, routing, replica, adapter);
    this.log = new LogChecks(
      replicas.replicas.map((r, i) => ({
        url: replicas.urls[i]!,
        log: r.log,
        word: () => {
          const e = r.engine.stats();
          const loaded = [...r.registry.values()].filter((a) => !a.static).map((a) => a.name);
          return { loaded, running: e.runningAdapters, waiting: e.waitingAdapters };
        },
        orphaned: () => new Set(redis.flatMap((db) => db.adaptersLeasedBy(replicas.urls[i]!, nodes.dead))),
      })),
      {
        maxLoadedAdapters: w.maxLoadedAdapters,
        nodes: w.nodes,
        coldLoadsPerMinute: w.coldLoadsPerMinute,
        excessGraceMs: 2 * POLL_MS + w.loadMs + 2 * PROBE_MS + 1000,
        quietAfterMs: (w.nodeTtlMs ?? NODE_TTL_MS) + 2 * PROBE_MS,
        // A load lock's TTL (load_timeout_ms and its margin), from a restart's end at the latest.
        staleLockMs: LOAD_TIMEOUT_MS + LOCK_MARGIN_MS + REDIS_DOWN_MAX_MS,
        ...budgetGroups(w, replicas.urls),
      },
      excused,
      {
        loads: calls.loadCalls,
        claims: calls.loadClaims,
        unloads: calls.unloadCalls,
        decidedAt: (request) => routing.decidedAt.get(request),
        spreads: calls.spreads,
        failed: replicas.failedLoads,
        backoffMs: BACKOFF_BASE_MS,
        onTheWay: (replica, adapter) => routing.onTheWay(replica, adapter),
      },
      {
        ledgers: redis.map((r) => r.budget),
        refusals: routing.refusals,
        fate: (request) => {
          const f = routing.fates.get(request);
          return f?.answered ? 'answered' : f && !f.p.alive ? 'died' : undefined;
        },
      },
    );
  }

  /** When runtime `rt` was last seen deciding alone after a step (-Infinity: never). */
  localSince(rt: FleetRuntime): number {
    return this.localAt.get(rt) ?? -Infinity;
  }

  /** Checks the world as `w` sees it after a step: the first invariant broken, or undefined. */
  afterStep(w: WorldView): Violation | undefined {
    const { sched, nodes, redis } = this.g;
    try {
      this.log.check(w);
      const past = this.g.routing.bound.check();
      if (past !== undefined) this.log.fail(w, BOUND_INVARIANT, past);
      const owed = owedEndHeld(w.now, this.g.lastFaultAt(), nodes, redis);
      if (owed !== undefined) this.log.fail(w, OWED_ENDS_INVARIANT, owed);
      if (nodes.passes.over !== undefined) this.log.fail(w, PASSES_INVARIANT, nodes.passes.over);
      const wasted = this.prefetch.check(this.g.calls.prefetchEnsures);
      if (wasted !== undefined) this.log.fail(w, PREFETCH_INVARIANT, wasted);
      const second = firstSecondRelease();
      if (second !== undefined)
        this.log.fail(
          w,
          'every in-flight count released exactly once',
          `second release of ${second} (LeaseNotOpen)`,
        );
      for (const p of nodes.procs) {
        if (!p.alive) continue;
        for (const rt of p.runtimes) if (rt.store.mode?.() === 'local') this.localAt.set(rt, w.now);
        // Held only while deciding: a request refused (503 ttft_overload, shed_low_priority),
        // sent or failed leaves the count, or later requests of its class wait behind nothing.
        const held = nodes.heldInGateway(p);
        if (held > p.routing)
          this.log.fail(
            w,
            'a request leaves the gateway when it ends',
            `node ${p.node}: ${held} request(s) counted as held with ${p.routing} routing`,
          );
        for (const rt of p.runtimes) {
          const waiting = rt.manager.roomChanged.waiting;
          if (waiting > p.routing + WAKEUP_SLACK)
            this.log.fail(
              w,
              'bounded memory',
              `node ${p.node}: ${waiting} wake-ups left with ${p.routing} requests routing`,
            );
        }
      }
      if (sched.pending > TIMER_BOUND) this.log.fail(w, 'bounded memory', `${sched.pending} timers pending`);
    } catch (err) {
      if (err instanceof InvariantBroken) return err.v;
      throw err;
    }
    return undefined;
  }
}

/**
 * With moves, the replicas only a moved record lists and the others: no configuration lists both
 * on one state outside a record change's span (dst/config-draw.ts), so each group's cold loads are
 * one state's budget at a time (docs/reliability.md "The cold-load budget": per shared state).
 */
function budgetGroups(w: Schedule['world'], urls: readonly string[]): { budgetGroups?: string[][] } {
  const away = w.configChanges?.move?.away;
  if (!away) return {};
  return {
    budgetGroups: [urls.filter((_, i) => !away.includes(i)), urls.filter((_, i) => away.includes(i))],
  };
}
