/**
 * One seeded scheduler for the whole simulated world: every timer of every node, replica and
 * modelled Redis fires from here, in time order, with events due at the same instant ordered by
 * the seeded PRNG (the interleavings explored). Between events the microtask queue drains, so
 * promise chains started by one event settle before the next fires, as on the wall clock. No
 * real timer, socket or process: the same seed fires the same events in the same order.
 */
import type { Clock } from '../src/clock';
import type { Random } from '../src/random';
import { heapPop, heapPush } from '../src/heap';

interface Timer {
  at: number;
  /** Seeded tie-break among timers due at the same instant. */
  key: number;
  fn: () => void;
  live: boolean;
}

/**
 * A message's trip: most arrive within the same instant (a microtask, no step), the rest 1-2 ms
 * later (a step of their own), seeded: the interleavings of calls from several nodes.
 */
/** The longest a message's trip takes, ms (`trip`). */
export const TRIP_MAX_MS = 2;

export function trip(clock: Clock, random: Random, fn: () => void): void {
  const ms = Math.floor(random() * 4) - 1;
  if (ms <= 0) void Promise.resolve().then(fn);
  else clock.after(ms, fn);
}

export class Scheduler implements Clock {
  private t = 0;
  private heap: Timer[] = [];
  /** Events fired so far: the schedule's steps. */
  steps = 0;
  /**
   * A digest of the times the steps fired at: two runs with the same digest fired their events at
   * the same instants (the replay and state-leak checks compare it, not only the step count).
   */
  digest = 0;

  constructor(
    private readonly random: Random,
    /**
     * The tie-breaks of `wakeAfter`'s timers (a lease kept young during a load): a stream of their
     * own, so the draws of every other timer, and the seeds found before they came, stay.
     */
    private readonly wakeRandom: Random = random,
  ) {}

  now(): number {
    return this.t;
  }

  after(ms: number, fn: () => void): () => void {
    return this.push(ms, this.random(), fn);
  }

  wakeAfter(ms: number, fn: () => void): () => void {
    return this.push(ms, this.wakeRandom(), fn);
  }

  private push(ms: number, key: number, fn: () => void): () => void {
    const ev: Timer = { at: this.t + Math.max(0, ms), key, fn, live: true };
    heapPush(this.heap, ev, less);
    return () => {
      ev.live = false;
    };
  }

  /** Timers queued, cancelled ones included until their time comes (bounded-memory check). */
  get pending(): number {
    return this.heap.length;
  }

  /**
   * Fires events in order until none is due by `until` or `stop()` says so; `afterStep` runs once
   * each event's microtasks settled (the invariants). Resolves when time reached `until`.
   * Driven by callbacks, not an await per step: each step's settling is one queued microtask and
   * one tick (see `settled`), with no promise of its own to resolve and resume.
   */
  run(until: number, afterStep: () => void, stop: () => boolean): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const next = () => {
        try {
          for (;;) {
            if (stop()) return resolve();
            const top = this.heap[0];
            if (!top || top.at > until) break;
            heapPop(this.heap, less);
            if (!top.live) continue;
            this.t = top.at;
            this.steps++;
            this.digest = (Math.imul(this.digest, 31) + Math.round(top.at * 1000)) | 0;
            top.fn();
            return settled(checked);
          }
          if (until > this.t) this.t = until;
          resolve();
        } catch (err) {
          reject(err as Error);
        }
      };
      const checked = () => {
        try {
          afterStep();
        } catch (err) {
          return reject(err as Error);
        }
        next();
      };
      settled(next);
    });
  }
}

function less(a: Timer, b: Timer): boolean {
  return a.at < b.at || (a.at === b.at && a.key < b.key);
}

/**
 * Calls `then` once every queued promise continuation ran (the check phase follows them). A
 * microtask that queues a tick, not a turn of the event loop (setImmediate cost about 3 µs a
 * step, a twentieth of one): V8 runs the microtask queue to empty once it starts, and Node runs
 * ticks only between such runs, so the tick finds every continuation queued before it, and those
 * they queued, done. (A tick queued directly can run before microtasks already queued: Node runs
 * the ticks first after a callback.) Nothing the world runs queues ticks or macrotasks of its own
 * (every timer is the scheduler's); dst-isolation and the replay tests compare the steps' times.
 */
function settled(then: () => void): void {
  queueMicrotask(() => process.nextTick(then));
}

/**
 * A node's view of the scheduler: its wall clock runs `skew` ms off true time (changed by the
 * clock-skew fault). Durations are true durations: skew moves timestamps, not rates.
 */
export class NodeClock implements Clock {
  /** Cleared when its process dies: none of its timers fires again, its pending work just stops. */
  alive = true;

  constructor(
    private readonly s: Scheduler,
    public skew = 0,
  ) {}

  now(): number {
    return this.s.now() + this.skew;
  }

  /** The process's monotonic time: true time, which the skew fault does not step. */
  monotonic(): number {
    return this.s.now();
  }

  after(ms: number, fn: () => void): () => void {
    return this.s.after(ms, () => {
      if (this.alive) fn();
    });
  }

  wakeAfter(ms: number, fn: () => void): () => void {
    return this.s.wakeAfter(ms, () => {
      if (this.alive) fn();
    });
  }
}
