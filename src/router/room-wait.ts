import type { RouterConfig } from '../config/router-schema';
import { RouterError } from '../errors';

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
 */
export class RoomWait {
  /** Past this, no more waiting: 503. */
  readonly deadline: number;
  /** Waiting for room on any replica (the pipeline with the `room` filter decides). */
  anywhere: boolean;

  constructor(
    private readonly config: Pick<RouterConfig, 'room_wait' | 'replica_wait_ms' | 'queue_timeout_ms'>,
    private readonly started: number,
  ) {
    this.deadline = started + config.queue_timeout_ms;
    this.anywhere = config.room_wait === 'anywhere';
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
