import { Lru } from '../lru';
import type { Clock } from '../clock';
import { errors } from '../errors';

/** Bound on per-(replica, adapter) backoff entries. */
export const BACKOFF_ENTRIES = 1024;

/**
 * Failed loads by replica and adapter: each failure doubles the wait before the next attempt,
 * up to a bound. Clients choose templated names, so this is bounded (least recently used out
 * first): a name pushed out merely loses its backoff.
 */
export class LoadBackoff {
  private readonly entries = new Lru<string, { failures: number; until: number; why: string }>(
    BACKOFF_ENTRIES,
  );

  constructor(private readonly clock: Clock) {}

  /** Entries held (bounded by BACKOFF_ENTRIES). */
  get size(): number {
    return this.entries.size;
  }

  /** Throws 503 with Retry-After while `key` is backing off. */
  check(key: string, adapter: string, url: string): void {
    const b = this.entries.get(key);
    const now = this.clock.now();
    if (b && now < b.until) throw errors.backingOff(adapter, url, Math.ceil((b.until - now) / 1000), b.why);
  }

  fail(key: string, policy: { backoffBaseMs: number; backoffMaxMs: number }, why: string): void {
    const prev = this.entries.get(key);
    const failures = (prev?.failures ?? 0) + 1;
    const delay = Math.min(policy.backoffMaxMs, policy.backoffBaseMs * 2 ** (failures - 1));
    this.entries.set(key, { failures, until: this.clock.now() + delay, why });
  }

  /** A load succeeded: the next failure starts from the base wait again. */
  clear(key: string): void {
    this.entries.delete(key);
  }
}
