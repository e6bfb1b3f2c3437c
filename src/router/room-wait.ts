import { ACCESS_WAIT_BUDGET_MS } from '../config/parse';
import type { RouterConfig } from '../config/router-schema';
import { RouterError } from '../errors';
import type { Candidate } from '../scheduler/types';

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
 * that bound (the rest is left for a slot): see `holds`.
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
  /** Until then a request predicted to miss `ttft_slo_ms` everywhere waits here (`holds`). */
  readonly holdUntil: number;
  private readonly sloMs: number;

  constructor(
    private readonly config: Pick<RouterConfig, 'room_wait' | 'replica_wait_ms' | 'queue_timeout_ms'> &
      Partial<Pick<RouterConfig, 'saturation_mode' | 'ttft_slo_ms'>>,
    private readonly started: number,
  ) {
    this.deadline = started + config.queue_timeout_ms;
    this.accessDeadline = started + ACCESS_WAIT_BUDGET_MS;
    this.anywhere = config.room_wait === 'anywhere';
    this.sloMs = config.saturation_mode === 'predicted' ? (config.ttft_slo_ms ?? 0) : 0;
    // Only `escalate` keeps the whole wait within `queue_timeout_ms` of arrival (Kong's RPC bound);
    // the other modes wait that long again on a replica.
    this.holdUntil =
      config.room_wait === 'escalate' && this.sloMs > 0
        ? Math.max(started, this.deadline - this.sloMs)
        : started;
  }

  /**
   * Overload: the decision (the fastest the rule allows) is predicted past `ttft_slo_ms`, so
   * every replica's queue is already longer than the objective. True to wait here and decide
   * again as requests finish, rather than join a queue: queued, it would delay the requests after
   * it past the objective too, until no request meets it; held, the replicas' queues stay short
   * enough for new requests to meet it, and it goes as soon as one replica is predicted to start
   * it in time. Its wait so far is not counted: a held request still wants the fastest start.
   * Past `holdUntil` it goes to the fastest replica (then a 503 only as the room wait says).
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
   */
  holds(now: number, decided: Pick<Candidate, 'ttftMs' | 'ownMs' | 'fixedMs'>): boolean {
    if (now >= this.holdUntil) return false;
    const own = decided.fixedMs + decided.ownMs;
    const shrinks = decided.ttftMs - own;
    return own < this.sloMs ? decided.ttftMs > this.sloMs : shrinks > this.sloMs;
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
    this.anywhere = true;
    return true;
  }
}
