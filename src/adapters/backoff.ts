import { Lru } from '../lru';
import type { Clock } from '../clock';
import { errors } from '../errors';
import type { LoadBackoffView } from '../scheduler/types';

/** Bound on the adapters with backoff entries (each with one entry per replica at most). */
export const BACKOFF_ENTRIES = 1024;

/** One (replica, adapter) pair's failed loads. */
interface Held {
  failures: number;
  until: number;
  why: string;
  /** The scheduler sends the adapter's requests to other replicas meanwhile (`fail`). */
  elsewhere: boolean;
}

/** An adapter's entries, by replica URL. */
interface OfAdapter {
  byUrl: Map<string, Held>;
  /** The latest end among its entries the scheduler routes around: past it, none is (cheap skip). */
  latest: number;
}

/**
 * Failed loads by replica and adapter: each failure doubles the wait before the next attempt,
 * up to a bound. Clients choose templated names, so this is bounded (least recently used adapter
 * out first): a name pushed out merely loses its backoff. Keyed by adapter, then replica, so the
 * scheduler's `load-backoff` filter asks once per decision whether the adapter backs off anywhere
 * (one map lookup), and per candidate only when it does.
 */
export class LoadBackoff implements LoadBackoffView {
  private readonly entries = new Lru<string, OfAdapter>(BACKOFF_ENTRIES);

  constructor(private readonly clock: Clock) {}

  /** Adapters with entries (bounded by BACKOFF_ENTRIES). */
  get size(): number {
    return this.entries.size;
  }

  /** Throws 503 with Retry-After while `adapter` is backing off on `url`. */
  check(url: string, adapter: string): void {
    const b = this.entries.get(adapter)?.byUrl.get(url);
    const now = this.clock.now();
    if (b && now < b.until) throw errors.backingOff(adapter, url, Math.ceil((b.until - now) / 1000), b.why);
  }

  /**
   * A load of `adapter` on `url` failed. `elsewhere`: its requests go to other replicas while it
   * backs off (false for a name not found that nobody has seen load: the unknown-name hold's
   * case, where another replica would most likely not find it either, after evicting for it).
   */
  fail(
    url: string,
    adapter: string,
    policy: { backoffBaseMs: number; backoffMaxMs: number },
    why: string,
    elsewhere = true,
  ): void {
    let of = this.entries.get(adapter);
    if (!of) this.entries.set(adapter, (of = { byUrl: new Map(), latest: 0 }));
    const failures = (of.byUrl.get(url)?.failures ?? 0) + 1;
    const delay = Math.min(policy.backoffMaxMs, policy.backoffBaseMs * 2 ** (failures - 1));
    const until = this.clock.now() + delay;
    of.byUrl.set(url, { failures, until, why, elsewhere });
    if (elsewhere && until > of.latest) of.latest = until;
  }

  /**
   * A load of `adapter` on `url` succeeded: the next failure there starts from the base wait again.
   * The name exists now: a replica where it was not found while unknown (`elsewhere` false) is
   * missing it alone, and its requests go to other replicas meanwhile.
   */
  clear(url: string, adapter: string): void {
    const of = this.entries.peek(adapter);
    if (!of) return;
    of.byUrl.delete(url);
    if (of.byUrl.size === 0) {
      this.entries.delete(adapter);
      return;
    }
    for (const b of of.byUrl.values())
      if (!b.elsewhere) {
        b.elsewhere = true;
        if (b.until > of.latest) of.latest = b.until;
      }
  }

  /**
   * Drops every entry of `url` (a replica that left: runtime-departures.ts `forgetReplica`). The
   * adapters are bounded, not their replicas: a pod gone whose loads failed stayed in each
   * adapter's entries for good (dst/process-audit.ts, seed 3120491).
   */
  forget(url: string): void {
    for (const [adapter, of] of this.entries.entries()) {
      // `latest` stays: still no earlier than every end kept.
      if (of.byUrl.delete(url) && of.byUrl.size === 0) this.entries.delete(adapter);
    }
  }

  /** Whether a load of `adapter` on `url` would be refused now (the prefetch plans none there). */
  holdsOff(url: string, adapter: string): boolean {
    const b = this.entries.peek(adapter)?.byUrl.get(url);
    return b !== undefined && this.clock.now() < b.until;
  }

  /** LoadBackoffView: whether some replica may hold off a load of `adapter` at `now`. */
  anyHeld(adapter: string, now: number): boolean {
    const of = this.entries.peek(adapter);
    return of !== undefined && now < of.latest;
  }

  /** LoadBackoffView: until when a load of `adapter` on `url` is held off (0: not, or not routed around). */
  heldUntil(adapter: string, url: string): number {
    const b = this.entries.peek(adapter)?.byUrl.get(url);
    return b?.elsewhere ? b.until : 0;
  }
}
