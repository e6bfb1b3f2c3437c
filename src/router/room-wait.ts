import { ACCESS_WAIT_BUDGET_MS } from '../config/parse';
import type { RouterConfig } from '../config/router-schema';
import { isLoadWaitRanOut } from '../adapters/policy';
import { errors, RouterError } from '../errors';
import type { Candidate } from '../scheduler/types';
import type { HeldClasses, RequestSlo } from './slo-class';

/**
 * Of a decision's predicted TTFT, the wait for an idle adapter to unload for room: a hold leaves it
 * out (the prediction counts all of `queue_timeout_ms` for it, a bound, not an estimate). Also what
 * the simulation's `max_in_flight` check reads of aging (dst/bound-watch.ts).
 */
export function idleAdapterWaitMs(
  decided: Pick<Candidate, 'fixedMs'> & Partial<Pick<Candidate, 'loadMs'>>,
): number {
  return (decided.loadMs ?? decided.fixedMs) - decided.fixedMs;
}

/**
 * Where and how long one cold request waits for an adapter slot when every adapter on the
 * replica it chose has requests in flight (`room_wait`; issue 15).
 *
 * - `replica`: wait on the chosen replica; 503 after `queue_timeout_ms`.
 * - `anywhere`: place the load only where room exists, waiting for room on any replica up to
 *   `queue_timeout_ms`, then on the chosen replica up to `queue_timeout_ms` again.
 * - `escalate`: wait on the chosen replica for `replica_wait_ms`, then for room on any replica;
 *   503 only when `queue_timeout_ms` has passed since the request came. In a burst the chosen
 *   replica's adapters stay busy far longer than a fixed wait while another replica frees a slot
 *   sooner, so a 503 is left for real overload, and the whole wait stays within one bound.
 *
 * Before any of that, under `escalate` with `saturation_mode: predicted`, a request no replica is
 * predicted to start within `ttft_slo_ms` waits here for one that is, until `ttft_slo_ms` before
 * that bound (the rest is left for a slot): see `holds`. With `slo_classes`, the objective is the
 * request's own (src/router/slo-class.ts), a class behind a higher one waits while the queues are
 * past the higher class's objective (until its wait and predicted start reach half its own: aging),
 * and a sheddable class is delayed while it can still meet its own and refused once it cannot.
 */
export class RoomWait {
  /** Past this, no more waiting: 503. */
  readonly deadline: number;
  /**
   * When the whole access phase must be over (Kong gives up on the plugin server at 60 s): every
   * scrape, unload, load, after-load check and retry of the request ends by then.
   */
  readonly accessDeadline: number;
  /** Waiting for room on any replica (the pipeline with the `room` filter decides). */
  anywhere: boolean;
  /** Until then a request predicted to miss its objective everywhere waits here (`holds`). */
  readonly holdUntil: number;
  /** The queue (predicted ms before its start) the request may join: see RequestSlo.gateMs. */
  private readonly gateMs: number;
  /** Its own objective: past it a sheddable request is refused rather than sent. */
  private readonly objectiveMs: number;
  private readonly sheddable: boolean;
  private readonly className: string;
  /** Its class's `max_in_flight` (0: no bound): see `holdsNow`. */
  private readonly maxInFlight: number;
  /** Its class's priority (0 without one). */
  readonly priority: number;
  /** At the end of its hold, still predicted past the objective everywhere, under a backlog: refused, not sent. */
  private readonly refusesAtHoldEnd: boolean;
  /**
   * The hold by which that refusal reads the gateway's run of late hold-ends: its own, or its
   * class's when longer. A client's looser `x-slo-ttft-ms` (28.9 s against `queue_timeout_ms` 29 s:
   * a 100 ms hold) ended the run for every request of its class, whose 24 s holds were then sent.
   */
  private readonly runHoldMs: number;
  /** Its class waits while a request of a higher class is held (RequestSlo.behindHigher). */
  private readonly behindHigher: boolean;
  /** Registered as held in `held` (its priority), until it goes or is refused. */
  private entered = false;

  constructor(
    private readonly config: Pick<RouterConfig, 'room_wait' | 'replica_wait_ms' | 'queue_timeout_ms'> &
      Partial<Pick<RouterConfig, 'saturation_mode' | 'ttft_slo_ms'>>,
    readonly started: number,
    slo?: RequestSlo,
    private readonly held?: HeldClasses,
  ) {
    this.deadline = started + config.queue_timeout_ms;
    this.accessDeadline = started + ACCESS_WAIT_BUDGET_MS;
    this.anywhere = config.room_wait === 'anywhere';
    const predicted = config.saturation_mode === 'predicted';
    this.objectiveMs = predicted ? (slo?.objectiveMs ?? config.ttft_slo_ms ?? 0) : 0;
    this.gateMs = predicted ? (slo?.gateMs ?? this.objectiveMs) : 0;
    this.sheddable = predicted && slo?.sheddable === true;
    this.className = slo?.name ?? '';
    this.maxInFlight = predicted ? (slo?.maxInFlight ?? 0) : 0;
    this.priority = slo?.priority ?? 0;
    // Only `escalate` keeps the whole wait within `queue_timeout_ms` of arrival (Kong's RPC bound);
    // the other modes wait that long again on a replica. A class behind a higher one waits up to
    // its own objective (it still meets it if the queues drain by then); the top class until its
    // objective before that bound, then goes to the fastest.
    this.holdUntil =
      config.room_wait !== 'escalate' || this.gateMs <= 0
        ? started
        : this.gateMs < this.objectiveMs
          ? Math.min(this.deadline, started + this.objectiveMs)
          : Math.max(started, this.deadline - this.objectiveMs);
    this.refusesAtHoldEnd = !this.sheddable && this.gateMs >= this.objectiveMs && this.holdUntil > started;
    this.behindHigher = predicted && (slo?.behindHigher ?? this.gateMs < this.objectiveMs);
    const classObjectiveMs = predicted ? (slo?.classObjectiveMs ?? this.objectiveMs) : 0;
    this.runHoldMs = Math.max(this.holdUntil - started, config.queue_timeout_ms - classObjectiveMs);
  }

  /**
   * Overload: the decision (the fastest the rule allows) is predicted past the objective (the
   * request's class's, else `ttft_slo_ms`; for a class behind a higher one, the higher one's), so
   * every replica's queue is already longer than the objective. True to wait here and decide
   * again as requests finish, rather than join a queue: queued, it would delay the requests after
   * it past the objective too, until no request meets it; held, the replicas' queues stay short
   * enough for new requests to meet it, and it goes as soon as one replica is predicted to start
   * it in time. Its wait so far is not counted: a held request still wants the fastest start.
   * Past `holdUntil` a request of the top class still predicted past its objective everywhere,
   * under a sustained overload (a backlog, late hold-ends for a whole hold), is refused (503
   * `ttft_overload`): see the end of
   * `holdsNow`. Otherwise it goes to the fastest replica then (a 503 only as the room wait says).
   * Only what waiting shortens is waited for: queued work draining, KV room, a slot or an idle
   * adapter freeing. The adapter's load and the unload making room for it (`fixedMs`) take as
   * long whenever it goes, and its own load cannot start while it is held. A request whose own
   * load and prefill alone take the objective misses it anyway: it is held only while the wait
   * that shrinks exceeds the objective too (the queues alone are past it), so on a fleet that is
   * not overloaded it goes at once, however slow its load.
   * Measured in the DES while a hold still counted the adapter's load (issue 25), long workload, 1 s loads, 90% load: 5% of requests within
   * 5 s without it, 11.5% with it (Dynamo's demand-sized set 13.3%); at 3 s loads and 70%, 1.3% and
   * 6.7%. llm-d's flow control likewise keeps requests queued in the
   * gateway while its saturation gate pauses dispatch (kubernetes-sigs/gateway-api-inference-extension
   * pkg/epp/flowcontrol/controller/internal/processor.go `dispatchCycle`, 04a97e67f7).
   * A sheddable request (`slo_classes` priority < 0) predicted to miss its own objective, its
   * wait here counted, is held on while the queues draining to its gate would still leave it in
   * time, and refused (throws `shed_low_priority`) once they would not. A class behind a higher
   * one is held only until its wait and predicted start reach half its objective (aging).
   */
  holds(
    now: number,
    decided: Pick<Candidate, 'ttftMs' | 'ownMs' | 'fixedMs'> &
      Partial<Pick<Candidate, 'loadMs' | 'inFlight' | 'stallsMs'>>,
  ): boolean {
    const held = this.holdsNow(now, decided);
    if (held !== this.entered && this.held) {
      if (held) this.held.enter(this.priority);
      else this.held.leave(this.priority);
      this.entered = held;
    }
    return held;
  }

  /** Its class has `max_in_flight`: the decision's in-flight count is judged (see `holdsNow`). */
  get boundsInFlight(): boolean {
    return this.maxInFlight > 0;
  }

  /**
   * Whether the decision's load would stop the engine under requests of a higher class waiting
   * there for their first token (src/router/prediction.ts `stallsMs`), for a quarter of that
   * class's objective or more. A class behind a higher one then waits in the gateway (until aged,
   * `holdsNow`), and its load is made once they have started or elsewhere. A shorter load is no
   * cause worth a hold: with 300 ms loads none of the late interactive requests (70% load, seeds
   * 1-3) was put down to another adapter's load, and held for them, interactive fell (98.4% to
   * 97.2% within 2 s); with 1 s loads at 50% load, 47 of 71 were, and held, it rose.
   */
  private stallsHigher(decided: Pick<Candidate, 'fixedMs'> & Partial<Pick<Candidate, 'stallsMs'>>): boolean {
    return (decided.stallsMs ?? 0) > 0 && decided.fixedMs * 4 >= this.gateMs;
  }

  /** The request leaves the gateway (sent, refused or failed): no longer counted as held. */
  leave(): void {
    if (this.entered) this.held?.leave(this.priority);
    this.entered = false;
  }

  private holdsNow(
    now: number,
    decided: Pick<Candidate, 'ttftMs' | 'ownMs' | 'fixedMs'> &
      Partial<Pick<Candidate, 'loadMs' | 'inFlight' | 'stallsMs'>>,
  ): boolean {
    if (this.gateMs <= 0) return false;
    const own = decided.fixedMs + decided.ownMs;
    const shrinks = decided.ttftMs - own;
    // A class with `max_in_flight` also waits, for the first half of its objective (less once
    // aged, below), while the replica has more of the router's requests in flight: the prediction
    // sees a replica's batch full only once a scrape reports a queue, and the higher classes'
    // requests that then queue behind a full batch are what they miss by (issue 34: 82 of the 106
    // late interactive requests at 300 ms loads and 70% load, each predicted within 2 s where it
    // went).
    const full =
      this.maxInFlight > 0 &&
      (decided.inFlight ?? 0) >= this.maxInFlight &&
      now - this.started < this.objectiveMs / 2;
    /** Predicted past the gate: the queues are, not only the replica's count. */
    const late = own < this.gateMs ? decided.ttftMs > this.gateMs : shrinks > this.gateMs;
    const busy = full || late;
    // A class behind a higher one also waits while a request of that class is held here: both are
    // decided again on the same signal, and the room freed is the higher one's.
    if (!busy)
      return (
        this.behindHigher &&
        // ...for the first half of its objective: the rest is left for the queue it then joins, so
        // it is rarely shed for having waited (all of it shed 72 of 311 batch requests at 70% load, 1 s loads).
        now - this.started + decided.ttftMs < this.objectiveMs / 2 &&
        // ...and never past `holdUntil` (within `queue_timeout_ms`): an objective over twice that
        // (a class's, or a client's `x-slo-ttft-ms` up to 600 s) held it past Kong's 60 s RPC bound.
        now < this.holdUntil &&
        (this.held?.above(this.priority) === true || this.stallsHigher(decided))
      );
    // llm-d refuses a sheddable request when no endpoint is predicted within its objective
    // (gateway-api-inference-extension v1.5.0, admitter/latencyslo/plugin.go `AdmitRequest`);
    // here its wait in the gateway so far counts, as it does toward its objective. Not the wait
    // for an idle adapter: the prediction counts all of `queue_timeout_ms` for it, a bound, not an
    // estimate (adapters go idle sooner below capacity: counted, it shed batch requests at 70% load).
    const roomMs = idleAdapterWaitMs(decided);
    const waited = now - this.started;
    const expected = waited + decided.ttftMs - roomMs;
    // Sent now it would miss, but it is not sent now: held, it goes once the fastest replica is
    // predicted within the gate (its own load and prefill besides, when they alone pass it). So
    // it is delayed, not shed, while that still meets its objective: shed on the prediction of
    // sending it now, 26 of the 28 batch requests shed at 1 s loads and 70% load (seed 1,
    // bench/des/shed-diagnosis.ts) were served within 30 s when held on instead. llm-d likewise queues a sheddable request in its priority
    // band while the pool is saturated (pkg/epp/flowcontrol/controller/internal/processor.go
    // `dispatchCycle`, v1.5.0) and judges it against its objective only when dispatched
    // (admitter/latencyslo/plugin.go `AdmitRequest`). So also while many requests of higher
    // classes are held: refused at once then (from twice the replicas), 13 of the 15 batch
    // requests shed at 1 s loads and 70% load (seed 1) were served within 30 s when held on; batch
    // within 30 s rose from 91.3% to 93.3% there (seeds 1-3), interactive refusals rising above
    // the interactive goal's loads (docs/routing.md). Not past `holdUntil` (its arrival without
    // `room_wait: escalate`, else `queue_timeout_ms` when that comes first): it would be sent now,
    // so it is judged as sent now.
    const releaseMs = own < this.gateMs ? this.gateMs : this.gateMs + own;
    if (
      this.sheddable &&
      expected > this.objectiveMs &&
      now < this.holdUntil &&
      waited + releaseMs < this.objectiveMs
    )
      return true;
    // Retry-After of a refusal: about how long the queues ahead take to drain, 1-60 s.
    const drainS = Math.min(60, Math.max(1, Math.ceil((shrinks - roomMs) / 1000)));
    if (this.sheddable && expected > this.objectiveMs) {
      this.leave();
      throw errors.shedLowPriority(this.className, this.objectiveMs, expected, drainS);
    }
    // Aging, as schedulers do against starvation: a class behind a higher one is held (for a queue
    // past its gate, or a replica past `max_in_flight`) only until its wait and predicted start
    // reach half its objective, then goes to the fastest replica however long the queue, ahead of
    // held requests of higher classes with time to spare (earliest deadline first). Held on until
    // its objective ran out, a batch request waited behind interactive work whose queues never fell
    // under 2 s, then was refused or sent too late (issue 34, 1 s loads, 90% load, seed 1: 69.1%
    // within 30 s, 70 refused; aged at half, 96.1%, 9 refused). Half, not later: the prediction
    // under such queues runs short by up to 2x (predicted 10 s when sent, started 17 s on). Not
    // sooner: aged at a third, interactive at 300 ms loads and 70% load (seed 3) fell from 97.0%
    // to 93.5% (at half 96.9%). llm-d's flow control does not age across priority bands: a lower
    // band dispatches only while every higher one is empty, until its request's TTL runs out
    // (gateway-api-inference-extension v1.5.0, pkg/epp/flowcontrol/controller/internal/
    // processor.go `dispatchCycle`).
    // Aged by its prediction alone (its wait under a quarter of its objective), it still waits
    // while its load would stall a higher class's first tokens there and it would still meet its
    // objective: a scrape's queue made batch requests held 2-5 s for that stall predicted 20 s at
    // once; sent, their loads stalled 14 interactive requests, all late (issue 34, 1 s loads, 50%
    // load, seed 3). Not past a quarter: held for it until its objective ran out, batch requests
    // were shed above capacity (1 s loads, 90% load, seeds 1-3: 12 to 50).
    if (this.behindHigher && expected >= this.objectiveMs / 2)
      return (
        this.stallsHigher(decided) &&
        expected < this.objectiveMs &&
        waited < this.objectiveMs / 4 &&
        now < this.holdUntil
      );
    if (now < this.holdUntil) return true;
    // Its hold is over, every replica is still predicted past the objective, and the overload is
    // sustained: the gateway holds a backlog (HeldClasses `backlogged`: three times as many
    // requests of its class or above as there are replicas), and such late hold-ends have come for
    // a whole hold, none a hold apart (HeldClasses `lateHoldEnds`). Sent, it would be answered past
    // its objective anyway, behind a queue that then pushes every request after it past it too,
    // until none meets it (issue 34, long workload, 3 s loads, 90% load, seeds 1-3: 1.8% within
    // 5 s when sent, 11.2% when refused; bench/des/peer-gap.ts). Refused, it leaves the replicas to
    // requests that can still make it. A cold start or a burst is sent, as before: its backlog may
    // last a whole hold, but its late hold-ends come within seconds and stop (refused at once, the
    // bursty workload's cold start, 1 s loads, 50% load, refused 7 requests in 1,000 where none
    // was). Only at the end of a hold the top class had: a class behind a higher one goes to its
    // own queue then, and a sheddable one was judged above.
    // Not for a replica past `max_in_flight` alone: predicted in time, it is no overload (a top
    // class with the bound and a hold shorter than half its objective was refused so).
    if (!this.refusesAtHoldEnd || !this.held || !late) return false;
    const holdMs = this.runHoldMs;
    if (this.held.lateHoldEnds(now, holdMs) >= holdMs && this.held.backlogged(this.priority)) {
      this.leave();
      throw errors.ttftOverload(this.objectiveMs, now - this.started + decided.ttftMs, drainS);
    }
    return false;
  }

  /**
   * The chosen replica cannot start the load now: true if the wait there is over (or, with
   * `replica_wait_ms` 0, never begins) and the request now looks for room anywhere.
   */
  escalateNow(now: number): boolean {
    if (this.config.room_wait !== 'escalate' || this.anywhere) return false;
    if (now < this.started + this.config.replica_wait_ms) return false;
    this.anywhere = true;
    return true;
  }

  /** How long the load on the chosen replica may wait for an idle adapter. */
  loadQueueMs(now: number): number {
    if (this.config.room_wait !== 'escalate') return this.config.queue_timeout_ms;
    const rest = Math.max(0, this.deadline - now);
    return this.anywhere
      ? rest
      : Math.min(rest, Math.max(0, this.started + this.config.replica_wait_ms - now));
  }

  /**
   * After a 503 for no room: true to wait for room anywhere instead. Also once waiting anywhere:
   * a request that joined another's load shares that load's 503, which ends the other's wait,
   * not this one's.
   */
  escalate(err: unknown, now: number): boolean {
    if (this.config.room_wait !== 'escalate' || now >= this.deadline) return false;
    if (!(err instanceof RouterError) || err.code !== 'adapter_slots_busy') return false;
    // Waited for the adapter's own load under way: elsewhere it would be a second load beside it.
    if (isLoadWaitRanOut(err)) return false;
    this.anywhere = true;
    return true;
  }
}
