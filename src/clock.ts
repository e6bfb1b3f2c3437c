/**
 * Injected time. Everything that waits or timestamps (routing core, replica simulator,
 * discrete-event benchmark) takes a Clock, so the same code runs on the wall clock, on a
 * scaled clock (the simulator replaying an hour in minutes) and on virtual time.
 */
import { heapPop, heapPush } from './heap';

export interface Clock {
  /** Milliseconds on this clock's own time line. */
  now(): number;
  /** Run `fn` after `ms` of this clock's time; returns a cancel function. */
  after(ms: number, fn: () => void): () => void;
  /**
   * `after`, for a wake that most often finds nothing to do (a lease kept young during one replica
   * call: src/adapters/call-keep.ts). Optional (`wakeAfter` falls back to `after`): the simulation
   * orders timers due at one instant by seeded draws, and draws for these from a stream of their
   * own, so adding them leaves every other timer's order, and each seed found before, as it was.
   */
  wakeAfter?(ms: number, fn: () => void): () => void;
  /**
   * Optional: milliseconds on a time line that never steps (a process's monotonic clock), for a
   * duration that must not shrink when `now` is stepped back (a skew correction). Without it,
   * `now`. SystemClock's `now` never steps either (performance.now) but for the fault run's hook.
   */
  monotonic?(): number;
}

/** `clock.monotonic()` where the clock has one, else `clock.now()`. */
export function monotonic(clock: Clock): number {
  return clock.monotonic ? clock.monotonic() : clock.now();
}

/** `clock.wakeAfter` where the clock has one, else `clock.after`. */
export function wakeAfter(clock: Clock, ms: number, fn: () => void): () => void {
  return clock.wakeAfter ? clock.wakeAfter(ms, fn) : clock.after(ms, fn);
}

/** Resolves after `ms` of the clock's time. */
export function sleep(clock: Clock, ms: number): Promise<void> {
  return new Promise((resolve) => clock.after(ms, resolve));
}

/**
 * Wall time divided by nothing, or sped up by `timeScale`: a modelled duration of `ms` takes
 * `ms / timeScale` of real time. Timers are unref'd so a clock never keeps a process alive
 * (Kong's `--dump-all-plugins` must exit).
 */
export class SystemClock implements Clock {
  private readonly origin = performance.now();
  /** Wall time at construction: Kong nodes sharing a store compare each other's timestamps. */
  private readonly epoch = performance.timeOrigin + this.origin;
  constructor(private readonly timeScale = 1) {
    if (!(timeScale > 0)) throw new RangeError(`timeScale must be > 0, got ${timeScale}`);
  }
  /** Unix milliseconds at construction, then monotonic (scaled) time from there. */
  now(): number {
    return this.line();
  }
  /**
   * The same line as `now`, kept apart so that the fault run's skew hook, which steps `now` as a
   * corrected node clock steps (pluginserver/clock-skew.ts), leaves durations alone: without it
   * the unseen hold and a word's age were measured on the stepped clock there.
   */
  monotonic(): number {
    return this.line();
  }
  private line(): number {
    return this.epoch + (performance.now() - this.origin) * this.timeScale;
  }
  after(ms: number, fn: () => void): () => void {
    const t = setTimeout(fn, Math.max(0, ms / this.timeScale));
    t.unref();
    return () => clearTimeout(t);
  }
}

export const systemClock: Clock = new SystemClock();

/**
 * Virtual time for discrete-event runs: timers fire in time order when `run` advances.
 * Between events it yields to the microtask queue, so promise chains started by one event
 * settle before the next event fires (async code behaves as it would on the wall clock).
 */
export class VirtualClock implements Clock {
  private t = 0;
  private seq = 0;
  private heap: { at: number; seq: number; fn: () => void; live: boolean }[] = [];

  now(): number {
    return this.t;
  }

  after(ms: number, fn: () => void): () => void {
    const ev = { at: this.t + Math.max(0, ms), seq: this.seq++, fn, live: true };
    heapPush(this.heap, ev, less);
    return () => {
      ev.live = false;
    };
  }

  /** Number of timers not yet fired or cancelled. */
  pending(): number {
    return this.heap.filter((e) => e.live).length;
  }

  /** Fire events in order until none is left or the next is later than `until`. */
  async run(until = Infinity): Promise<void> {
    await flushMicrotasks();
    for (;;) {
      const top = this.heap[0];
      if (!top || top.at > until) break;
      heapPop(this.heap, less);
      if (!top.live) continue;
      this.t = top.at;
      top.fn();
      await flushMicrotasks();
    }
    if (until !== Infinity && until > this.t) this.t = until;
  }
}

function less(a: { at: number; seq: number }, b: { at: number; seq: number }): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}

/** Lets every queued promise continuation run (several rounds of microtasks). */
function flushMicrotasks(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
