import type { Clock } from './clock';

/**
 * Wakes everyone waiting for "something changed" at once: waiters for an adapter slot wait on
 * it instead of polling the store. A bounded fallback covers changes this process does not see
 * (another Kong node's release, with a shared store).
 */
export class Signal {
  private waiters = new Set<() => void>();

  /** Wake-up callbacks registered and not yet called: each belongs to a wait under way. */
  get waiting(): number {
    return this.waiters.size;
  }

  notify(): void {
    // Called after every decision and every release: most find no one waiting.
    if (this.waiters.size === 0) return;
    const w = this.waiters;
    this.waiters = new Set();
    for (const wake of w) wake();
  }

  /**
   * Resolves at the next notify, or after `fallbackMs` on `clock`. Whichever comes first takes
   * the other away: a held request waits on the fallback four times a second, and traffic that
   * never notifies (the base model's) would otherwise leave a wake-up behind each time.
   */
  wait(clock: Clock, fallbackMs: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const wake = () => {
        cancel();
        resolve();
      };
      this.waiters.add(wake);
      const cancel = clock.after(fallbackMs, () => {
        this.waiters.delete(wake);
        resolve();
      });
    });
  }
}
