/**
 * A shared side for failover-store tests: an in-process store behind a switch. Calls go to `extra`'s
 * own functions where it has them, else to `inner`; while `down()` every call fails as a lost
 * link would. Writes to it (hooks a store sets) are dropped.
 */
import type { MemoryFleetStore } from '../../src/fleet/memory-store';
import type { SharedStore } from '../../src/fleet/redis/shared-store';

export function switchedShared(
  inner: MemoryFleetStore,
  extra: Record<string, unknown>,
  down: () => boolean,
): SharedStore {
  return new Proxy(extra, {
    get(target, key) {
      const own = target[key as string];
      const v = own ?? (Reflect.get(inner, key, inner) as unknown);
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        if (down()) return Promise.reject(new Error('shared store down'));
        return (v as (...a: unknown[]) => unknown).apply(own ? target : inner, args);
      };
    },
    set: () => true,
  }) as unknown as SharedStore;
}
