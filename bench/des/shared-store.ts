import type { Clock } from '../../src/clock';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import type { FleetStore } from '../../src/fleet/store';

/** Operations after which Redis publishes "room may have freed" to every node. */
const PUBLISHING = new Set(['finishLoad', 'finishUnload', 'release', 'expireLeases']);

/**
 * Several Kong nodes' view of one shared store, in virtual time: every node gets its own
 * handle (its own `onRemoteChange`, as each node has its own Redis subscriber), all handles
 * share one state, and a change wakes every node a tick later, as Redis pub/sub does. The
 * store semantics are the FleetStore contract the Redis store passes (test/core/fleet-store).
 */
export function sharedStoreHandles(clock: Clock, nodes: number): FleetStore[] {
  const shared = new MemoryFleetStore();
  const listeners: ((() => void) | null)[] = Array.from({ length: nodes }, () => null);
  const publish = () =>
    clock.after(0, () => {
      for (const l of listeners) l?.();
    });
  return listeners.map((_, i) => {
    const handle = new Proxy(shared, {
      get(target, key) {
        if (key === 'onRemoteChange') return listeners[i];
        const v: unknown = Reflect.get(target, key, target);
        if (typeof v !== 'function') return v;
        const fn = v as (...a: unknown[]) => unknown;
        if (!PUBLISHING.has(String(key))) return fn.bind(target);
        return async (...args: unknown[]) => {
          const out = await fn.apply(target, args);
          publish();
          return out;
        };
      },
      set(_target, key, value) {
        if (key !== 'onRemoteChange') return false;
        listeners[i] = value as (() => void) | null;
        return true;
      },
    });
    return handle as FleetStore;
  });
}
