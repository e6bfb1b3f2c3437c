import type { Clock } from '../../src/clock';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import type { FleetStore } from '../../src/fleet/store';

/** Operations after which Redis publishes "room may have freed" to every node. */
const PUBLISHING = new Set(['finishLoad', 'finishUnload', 'release', 'expireLeases']);
/**
 * The in-process store's answers in the call (FleetStore `viewsNow`, `acquireNow`, `releaseNow`):
 * a shared store has none, each is a round trip. Offered, a node released through `releaseNow`
 * and no other node heard of it (review 58).
 */
const IN_THE_CALL = new Set(['viewsNow', 'acquireNow', 'releaseNow']);
/** Callbacks each node sets on its own handle (runtime.ts), as on its own Redis connection. */
const PER_NODE = new Set(['onRemoteChange', 'onSharedAgain']);

/**
 * Several Kong nodes' view of one shared store, in virtual time: every node gets its own
 * handle (its own `onRemoteChange`, as each node has its own Redis subscriber), all handles
 * share one state, and a change wakes every node a tick later, as Redis pub/sub does. The
 * store semantics are the FleetStore contract the Redis store passes (test/core/fleet-store).
 */
export function sharedStoreHandles(clock: Clock, nodes: number): FleetStore[] {
  const shared = new MemoryFleetStore(clock);
  const listeners: ((() => void) | null)[] = Array.from({ length: nodes }, () => null);
  const publish = () =>
    clock.after(0, () => {
      for (const l of listeners) l?.();
    });
  return listeners.map((_, i) => {
    // The in-process store has no outage: its `onSharedAgain` is never called, only kept.
    const own: Record<string, unknown> = { onSharedAgain: null };
    const handle = new Proxy(shared, {
      get(target, key) {
        if (key === 'onRemoteChange') return listeners[i];
        if (typeof key === 'string' && PER_NODE.has(key)) return own[key];
        if (typeof key === 'string' && IN_THE_CALL.has(key)) return undefined;
        // Each node claims the replicas it routes to as itself, as on Redis (its node id).
        if (key === 'upsertReplica')
          return (spec: Parameters<MemoryFleetStore['upsertReplica']>[0]) =>
            target.upsertReplica(spec, `n${i}`);
        if (key === 'retainReplicas')
          return (urls: readonly string[], graceMs: number) =>
            target.retainReplicas(urls, graceMs, { node: `n${i}` });
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
        if (key === 'onRemoteChange') listeners[i] = value as (() => void) | null;
        else if (typeof key === 'string' && PER_NODE.has(key)) own[key] = value;
        else return false;
        return true;
      },
    });
    return handle as FleetStore;
  });
}
