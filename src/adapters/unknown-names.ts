/**
 * What a name nobody has seen load may cost: vLLM cannot say whether a path exists without
 * loading it, so once such a name was not found on a replica, another unknown name may not
 * evict there for a backoff window (one eviction per window per replica for invented names).
 * A name is known once listed in the configuration or loaded somewhere by this process.
 */
import { Lru } from '../lru';
import type { Clock } from '../clock';
import { errors } from '../errors';

/** Bound on the names remembered as loaded at least once. */
export const VERIFIED_NAMES = 4096;

/** What of a configuration's adapter policy this needs (AdapterPolicy, adapters/manager.ts). */
type NamePolicy = { backoffBaseMs: number; isListed?: (name: string) => boolean };

export class UnknownNames {
  /** Names this process has seen load (known to exist): bounded like the backoff. */
  private readonly verified = new Lru<string, true>(VERIFIED_NAMES);
  /** Per replica: until when a name nobody has seen load may not evict there. */
  private readonly blocked = new Map<string, number>();

  constructor(private readonly clock: Clock) {}

  /** `name` loaded: it exists. */
  loaded(name: string): void {
    this.verified.set(name, true);
  }

  /** `name` was not found on `url`: if nobody has seen it load, unknown names wait there. */
  notFound(url: string, name: string, policy: NamePolicy): void {
    if (!this.known(name, policy)) this.blocked.set(url, this.clock.now() + policy.backoffBaseMs);
  }

  /** Refuses to evict for a name not known to exist on a replica where such a name was just not found. */
  check(url: string, name: string, policy: NamePolicy): void {
    const until = this.blocked.get(url);
    if (until === undefined || this.known(name, policy)) return;
    const now = this.clock.now();
    if (now >= until) {
      this.blocked.delete(url);
      return;
    }
    throw errors.unverifiedName(name, url, Math.max(1, Math.ceil((until - now) / 1000)));
  }

  /** Drops `url`'s block (a replica that left). */
  forget(url: string): void {
    this.blocked.delete(url);
  }

  /** A name known to exist: listed in the configuration, or loaded somewhere before. */
  known(name: string, policy: NamePolicy): boolean {
    return this.verified.has(name) || policy.isListed?.(name) === true;
  }
}
