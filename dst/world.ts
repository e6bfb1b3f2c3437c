/**
 * The simulated world of one schedule: router nodes running the real code of src/ (FleetRuntime
 * with its failover store, held leases, outage budget, adapter manager, poller; RouterService with
 * placement, the hold and room waits), each node a plugin-server process on its own skewed clock
 * (node-processes.ts); the modelled Redis (redis-model.ts) under their failover stores; the
 * simulator's vLLM replicas (replicas.ts). Kong's part is modelled (request-routing.ts): it sends
 * each request to one node's access phase, proxies it to the replica chosen and runs the log phase
 * on the same process, if still alive. Here: the wiring, and the run (steps, then the settling).
 * The faults: world-faults.ts; the checks after each step: world-checks.ts; the settling's end:
 * world-settle.ts.
 */
import type { FailoverFleetStore } from '../src/fleet/redis/failover-store';
import type { RegistryLoss } from './trim-check';
import { seededRandom, type Random } from '../src/random';
import { CallsSeen } from './calls-seen';
import { ForgetCheck } from './forget-check';
import { auditProcesses } from './process-audit';
import { HealthReads } from './health-reads';
import type { Violation, WorldView } from './invariants';
import { clearSecondReleases, forgetHandedLeases } from './lease-watch';
import { samplesOnly } from './metrics-samples';
import { NodeProcesses, redisConfig } from './node-processes';
import { RedisModel } from './redis-model';
import { registryLosses } from './registry-loss';
import { ReplicaSet } from './replicas';
import { RequestRouting } from './request-routing';
import type { Action, FaultKind, Schedule } from './schedule';
import { NodeClock, Scheduler } from './scheduler';
import { StepView } from './step-view';
import { StepChecks, unloadExcused } from './world-checks';
import { WorldFaults } from './world-faults';
import { quiescence, settled } from './world-settle';
import { POLL_MS, SETTLE_MS, SETTLE_TICK_MS, TAIL_MS } from './world-timings';

/** dst/bound-check.ts (tests import it from here). */
export { BOUND_INVARIANT } from './bound-check';

export interface RunResult {
  steps: number;
  violation?: Violation;
  simMs: number;
  /** The scheduler's digest of when each step fired (Scheduler.digest). */
  digest: number;
  /**
   * The fault kinds this schedule fired, and those fired while a request or a load call was
   * under way (the coverage the CLI prints: a fault on an idle world explores little).
   */
  faults: { fired: FaultKind[]; busy: FaultKind[] };
  /** Load calls a node sent deciding alone (its share of the budget): what a short node_ttl_ms runs. */
  aloneLoads: number;
  /** Overload refusals answered: 503 `ttft_overload` (a hold's end) and `shed_low_priority`. */
  overloadRefusals: { ttftOverload: number; shed: number };
  /** Hold calls that held a request of a class bounded by `max_in_flight` at its bound. */
  boundWaits: number;
  /** Kong's own 502/504 that marked a replica down, and requests proxied after one no poll undid (dst/kong-mark-check.ts). */
  kongMarks: { marked: number; judged: number };
  /**
   * With prefetching on (absent: off, so a seed without it reports as before): the load calls its
   * ticks sent, and the unloads of victims they sent to make room.
   */
  prefetch?: { loads: number; unloads: number };
  /**
   * With clients' or Kong's draws on its requests (absent: none, so a seed without them reports as
   * before): what they met (RequestRouting.clients).
   */
  clients?: { gaveUp: number; ranOn: number; exits: number; slowSources: number; tells: number };
  /**
   * With configuration changes (absent: none, so a seed without them reports as before): the
   * replicas a retain call forgot, and those a node's configuration listed again after.
   */
  forgets?: { forgotten: number; listedAgain: number };
}

export class World {
  readonly sched: Scheduler;
  private readonly random: Random;
  private readonly redis: RedisModel[];
  private readonly replicas: ReplicaSet;
  /** The record of calls each replica saw. */
  private readonly calls: CallsSeen;
  /** The nodes' plugin-server processes. */
  private readonly nodes: NodeProcesses;
  /** The requests Kong sends, and what each met. */
  private readonly routing: RequestRouting;
  private readonly faults: WorldFaults;
  private readonly checks: StepChecks;
  /** By request (arrival number): the store calls its decision made, as answered. */
  private readonly healthReads = new HealthReads();
  /** With configuration changes: what the store forgot, judged (dst/forget-check.ts). */
  private readonly forget: ForgetCheck | undefined;
  /** Replicas forgotten and then listed again by a node's configuration change. */
  private listedAgain = 0;
  private violation: Violation | null = null;
  private readonly w: Schedule['world'];

  constructor(private readonly schedule: Schedule) {
    this.w = schedule.world;
    this.random = seededRandom(schedule.seed ^ 0x5bd1e995);
    // A stream of its own for the wakes that keep a lease young during a load (Clock.wakeAfter).
    this.sched = new Scheduler(
      seededRandom(schedule.seed ^ 0x27d4eb2f),
      seededRandom(schedule.seed ^ 0x165667b1),
    );
    this.replicas = new ReplicaSet(this.sched, {
      replicas: this.w.replicas,
      maxLoras: this.w.maxLoadedAdapters + this.w.nodes + 1,
      loadMs: this.w.loadMs,
      decodeMsPerStep: this.w.decodeMsPerStep,
      adapters: this.w.adapters,
      staticAdapters: this.w.staticAdapters ?? [],
      ...(this.w.maxNumSeqs !== undefined ? { maxNumSeqs: this.w.maxNumSeqs } : {}),
    });
    samplesOnly(schedule.seed, this.replicas);
    this.replicas.timeoutNotice = seededRandom(schedule.seed * 2654435761 + 18);
    this.calls = new CallsSeen(this.sched, () => this.degraded());
    this.replicas.slowCallSeen = (hopMs) => this.calls.slowCallSeen(hopMs);
    const order = { n: 0 };
    this.redis = [0, 1].map(
      (db) => new RedisModel(this.sched, redisConfig(this.w, db, 0), this.random, order),
    );
    this.nodes = new NodeProcesses({
      sched: this.sched,
      random: this.random,
      redis: this.redis,
      replicas: this.replicas,
      schedule,
      calls: this.calls,
      healthReads: this.healthReads,
    });
    for (let n = 0; n < this.w.nodes; n++)
      this.nodes.procs.push(this.nodes.start(n, 0, 0, new NodeClock(this.sched)));
    this.faults = new WorldFaults({
      sched: this.sched,
      world: this.w,
      nodes: this.nodes,
      redis: this.redis,
      replicas: this.replicas,
      died: (p) => this.routing.died(p),
    });
    this.routing = new RequestRouting({
      sched: this.sched,
      schedule,
      replicas: this.replicas,
      nodes: this.nodes,
      redis: this.redis,
      calls: this.calls,
      healthReads: this.healthReads,
      answers: {
        log: (url) => this.replicas.replica(url).log,
        restarts: (url) => this.replicas.registryLost.filter((r) => r.url === url),
        unloadExcused: (replica, adapter) => unloadExcused(this.calls, this.routing, replica, adapter),
        unloader: (replica, adapter) => this.calls.unloaders.get(`${replica}\u0000${adapter}`),
        rolledBack: (db) => this.redis[db]!.resets,
      },
      localAt: (rt) => this.checks.localSince(rt),
      lastFaultAt: () => this.faults.lastFaultAt,
      partitionTimeoutsBy: () => this.faults.partitionTimeoutsBy,
      lastRecordChange: () => this.faults.lastRecordChange,
      view: () => this.view(),
      violate: (v) => {
        this.violation ??= v;
      },
    });
    this.checks = new StepChecks({
      sched: this.sched,
      world: this.w,
      replicas: this.replicas,
      redis: this.redis,
      nodes: this.nodes,
      calls: this.calls,
      routing: this.routing,
      lastFaultAt: () => this.faults.lastFaultAt,
    });
    this.forget = this.w.configChanges
      ? new ForgetCheck({
          sched: this.sched,
          world: this.w,
          nodes: this.nodes,
          redis: this.redis,
          routing: this.routing,
          calls: this.calls,
          urls: this.replicas.urls,
        })
      : undefined;
  }

  /**
   * The world as the checks see it now. `degraded` and `resets` are read only when a check needs
   * them (a new log entry, a replica over the limit, a load call): most steps need neither, and
   * the checks run after every step.
   */
  private view(): WorldView {
    return new StepView(this.sched.now(), this.sched.steps, this.faults.lastFaultAt, this);
  }

  /**
   * Times either shared state was emptied, and the spans of record changes to other state (one
   * budget more each: the old and the new state each keep a window until the last node moves).
   */
  resets(): (number | { from: number; to: number })[] {
    // Each fault empties both databases at once: one not used yet by any node counts for nothing
    // (counted, it allowed the fleet two budgets more per FLUSHALL, restart or lossy switch).
    const used = (db: number) => this.redis[db]!.resets.filter((t) => t >= this.nodes.dbUsedFrom[db]!);
    return [...used(0), ...used(1), ...this.faults.stateMoves];
  }

  /**
   * Of `resets`, those that may bring back state no call backs (a lock of a load that ended): the
   * shared state restored from an older copy, and the record changes' spans (the other state kept
   * what it held).
   */
  restores(): (number | { from: number; to: number })[] {
    const used = (db: number) => this.redis[db]!.restores.filter((t) => t >= this.nodes.dbUsedFrom[db]!);
    return [...used(0), ...used(1), ...this.faults.stateMoves];
  }

  /** Replica restarts that forgot adapters loaded at run time, and when a registry read first saw each. */
  registryLost(): readonly RegistryLoss[] {
    return registryLosses(
      this.replicas.registryLost,
      this.redis.flatMap((r) => r.registryReads),
      this.redis.flatMap((r) => r.unloadLocks()),
    );
  }

  /** Whether a fault is under way now. */
  faultOpen(): boolean {
    return this.faults.open > 0;
  }

  /** Whether any node decides alone now, holds off its unloads, or a fault is under way. */
  degraded(): boolean {
    if (this.faults.open > 0) return true;
    for (const p of this.nodes.procs) if (p.alive && p.rt.store.mode?.() === 'local') return true;
    // A node whose unloads are held off (a record change from other state, Redis just back) keeps
    // an excess its after-load check found: a peer on the old state may be using it (seed 704).
    for (const p of this.nodes.procs)
      if (p.alive && p.runtimes.some((rt) => (rt.store as FailoverFleetStore).unloadsHeldOff?.()))
        return true;
    return false;
  }

  private afterStep(): void {
    if (this.violation) return;
    const v = this.checks.afterStep(this.view()) ?? this.forget?.afterStep(this.view());
    if (v) this.violation = v;
  }

  private apply(a: Action): void {
    if (a.kind === 'request') return void this.routing.request(a);
    if ((a.kind === 'config-change' || a.kind === 'move') && this.forget) {
      const after = a.replicas.map((i) => this.replicas.urls[i]!);
      this.forget.changing(this.nodes.listed[a.node]!, after);
      const forgotten = new Set(this.redis.flatMap((r) => r.forgotten.map((f) => f.url)));
      this.listedAgain += after.filter(
        (u) => forgotten.has(u) && !this.nodes.listed[a.node]!.includes(u),
      ).length;
    }
    this.faults.apply(a, this.routing.inFlight > 0 || this.calls.loadsInFlight > 0);
  }

  async run(): Promise<RunResult> {
    clearSecondReleases();
    for (const a of this.schedule.actions) this.sched.after(a.at, () => this.apply(a));
    // Snapshots (RDB saves) six a span (every second of a 6 s one), for restarts from an older one.
    const every = this.w.spanMs / 6;
    for (let t = every / 2; t < this.w.spanMs; t += every)
      this.sched.after(t, () => this.redis.forEach((r) => r.takeSnapshot()));
    const stop = () => this.violation !== null;
    const step = () => this.afterStep();
    try {
      // Until the last action came too: a shape may draw one past the span it set (dst/reach.ts,
      // seed 2401991), and the tail below stops once no request is under way, before it came.
      const lastAt = Math.max(this.w.spanMs, ...this.schedule.actions.map((a) => a.at));
      await this.sched.run(lastAt, step, stop);
      // Traffic stops; faults heal by their timers. Settle until every request ended.
      // Past the access deadline (55 s) and the upstream timeout after the last request came.
      await this.sched.run(
        this.sched.now() + TAIL_MS,
        step,
        () => stop() || (this.nodes.liveOpen() === 0 && this.faults.open === 0),
      );
      // Then until the world is quiescent, or SETTLE_MS at most, before the lease check: from the
      // last reply a slow link owed, as a probe sent before it comes waits for it and times out.
      const settleBy = Math.max(this.sched.now(), this.faults.slowRepliesDueBy) + SETTLE_MS;
      const overLimit = () => this.checks.log.overLimit();
      while (
        !stop() &&
        this.sched.now() < settleBy &&
        !(await settled(this.sched.now(), this.nodes, this.faults, overLimit))
      )
        await this.sched.run(Math.min(settleBy, this.sched.now() + SETTLE_TICK_MS), step, stop);
      if (!stop())
        this.violation = (await quiescence(this.view(), this.nodes, this.routing.inFlight)) ?? null;
      // With configuration changes: on until every replica no configuration lists is due forgotten,
      // and a poll round past it, then judged (dst/forget-check.ts).
      const due = !stop() && this.forget ? this.forget.due() : new Map<string, number>();
      if (due.size > 0) {
        await this.sched.run(Math.max(this.sched.now(), ...due.values()) + 2 * POLL_MS, step, stop);
        if (!stop())
          this.violation =
            this.forget!.forgotten(this.view(), due) ?? auditProcesses(this.view(), this.nodes, due) ?? null;
      }
      // On until each runtime every plugin of its node left is due quiet, then judged (dst/left-check.ts).
      const quietBy = stop() ? [] : this.nodes.left.due(this.nodes).map((d) => d.by);
      if (quietBy.length > 0) {
        await this.sched.run(Math.max(this.sched.now(), ...quietBy) + POLL_MS, step, stop);
        if (!stop())
          this.violation =
            this.nodes.left.judge(this.nodes, this.calls.lastBySender, this.sched.now(), this.sched.steps) ??
            null;
      }
    } finally {
      this.close();
    }
    return {
      steps: this.sched.steps,
      simMs: this.sched.now(),
      digest: this.sched.digest,
      faults: { fired: [...this.faults.fired], busy: [...this.faults.firedBusy] },
      aloneLoads: this.calls.loadCalls.filter((c) => c.alone).length,
      overloadRefusals: { ...this.routing.overloadRefusals },
      boundWaits: this.routing.bound.boundWaits,
      kongMarks: { ...this.routing.kongMarks },
      ...(this.w.prefetch
        ? {
            prefetch: {
              loads: this.calls.loadCalls.filter((c) => c.prefetch).length,
              unloads: this.calls.unloadCalls.filter((c) => c.prefetch).length,
            },
          }
        : {}),
      ...(this.schedule.actions.some(
        (a) => a.kind === 'request' && (a.gaveUp ?? a.exit ?? a.sourceMs) !== undefined,
      )
        ? { clients: { ...this.routing.clients } }
        : {}),
      ...(this.w.configChanges
        ? {
            forgets: {
              forgotten: this.redis.reduce((n, r) => n + r.forgotten.length, 0),
              listedAgain: this.listedAgain,
            },
          }
        : {}),
      ...(this.violation ? { violation: this.violation } : {}),
    };
  }

  private close(): void {
    for (const p of this.nodes.procs) for (const rt of p.runtimes) rt.stop();
    // The process-wide lease map (src/lease.ts) outlives a schedule: forget this world's leases.
    forgetHandedLeases();
  }
}
