import { sleep, type Clock } from './clock';

/**
 * Wakes everyone waiting for "something changed" at once: waiters for an adapter slot wait on
 * it instead of polling the store. A bounded fallback covers changes this process does not see
 * (another Kong node's release, with a shared store).
 */
export class Signal {
  private waiters: (() => void)[] = [];

  notify(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const wake of w) wake();
  }

  /** Resolves at the next notify, or after `fallbackMs` on `clock`. */
  wait(clock: Clock, fallbackMs: number): Promise<void> {
    return Promise.race([
      new Promise<void>((resolve) => this.waiters.push(resolve)),
      sleep(clock, fallbackMs),
    ]);
  }
}
