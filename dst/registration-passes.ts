/**
 * The passes of a node's registration of its replicas (recovering-store.ts `registerReplicas`): it
 * writes them again while the shared state was emptied between two of its writes, a few passes at
 * most, then fails as a write does (the caller degrades, the next probe registers). Before that
 * bound a state emptied in each pass kept it writing with no end (test/core/failover-leftovers.test.ts).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { ReplicaSpec } from '../src/fleet/types';

export const PASSES_INVARIANT = 'a registration the shared state keeps emptying ends after a few passes';

/** The passes the router allows itself (recovering-store.ts `REGISTRATION_PASSES`). */
export const REGISTRATION_PASSES_MAX = 3;

interface Registration {
  /** The replicas written so far (one pass writes each once). */
  urls: Set<string>;
  writes: number;
}

/** The store's parts read here (private in src: wrapped on each instance, they return as before). */
interface Registering {
  registerReplicas?: (ups: boolean) => Promise<void>;
  shared: { upsertReplica(spec: ReplicaSpec): Promise<void> };
}

/**
 * One for every world a process runs: on Node 20 and 22 each AsyncLocalStorage ever made (none is
 * disabled) is visited at every promise made after it, so one a world made a sweep slower with each
 * schedule (Node 20: 0.17 CPU s a schedule for the first 100 seeds, 1.0 by the fifth hundred).
 */
const current = new AsyncLocalStorage<Registration>();

export class RegistrationPasses {
  /** The first registration past the bound, described. */
  over: string | undefined;

  /** Counts the writes of each registration of `store` (a failover store), in its own async context. */
  watch(store: unknown, name: string): void {
    const s = store as Registering;
    const { registerReplicas } = s;
    if (!registerReplicas) return;
    // No await added: the registration's steps run as before.
    s.registerReplicas = (ups) =>
      current.run({ urls: new Set(), writes: 0 }, () => registerReplicas.call(s, ups));
    const upsert = s.shared.upsertReplica.bind(s.shared);
    s.shared.upsertReplica = (spec) => {
      const r = current.getStore();
      if (r) {
        r.urls.add(spec.url);
        if (++r.writes > REGISTRATION_PASSES_MAX * r.urls.size)
          this.over ??= `${name}: a registration of ${r.urls.size} replica(s) wrote ${r.writes} times (${REGISTRATION_PASSES_MAX} passes at most)`;
      }
      return upsert(spec);
    };
  }
}
