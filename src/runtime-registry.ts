/**
 * One runtime per `redis` record in this plugin-server process: the plugins configured alike
 * share it, and a record change replaces it (same shared state: at once, keeping its node id;
 * other state: those whose replicas the new one takes over). How a replaced runtime hands over
 * is FleetRuntime.retire's.
 */
import { sharesState, stateKeyOf, type RedisConfig } from './config/redis-schema';
import { operatorLog } from './log';
import { FleetRuntime } from './runtime';

/** This process's current runtimes, by `redis` record (one without Redis). */
const runtimes = new Map<string, FleetRuntime>();

/**
 * The runtime of this plugin-server process for a plugin's `redis` record, created on first
 * use: lora-router and lora-poller configured alike share it, whatever instances Kong creates.
 * A new record on the same shared state (a changed timeout, say) replaces the runtime at once
 * and keeps its node id; one on other state replaces those whose replicas it takes over.
 */
export function sharedRuntime(redis?: RedisConfig): FleetRuntime {
  const key = sharesState(redis) ? JSON.stringify(redis) : '';
  const rt = runtimes.get(key);
  if (rt) return rt;
  const stateKey = stateKeyOf(redis);
  const same = [...runtimes.values()].find((r) => r.stateKey === stateKey);
  const next = new FleetRuntime({
    redis: key === '' ? undefined : redis,
    leasePrefix: same?.leasePrefix,
    leaseSeq: same?.leaseSeq,
    log: operatorLog,
  });
  runtimes.set(key, next);
  if (same) replace(same, next);
  return next;
}

/**
 * A router configuration on `rt` routes to `urls`: runtimes of other records that route to
 * any of them step down for `rt` (one process, one view of a replica, or loads would collide).
 */
export function claimReplicas(rt: FleetRuntime, urls: readonly string[]): void {
  for (const other of [...runtimes.values()]) {
    if (other === rt || other.stateKey === rt.stateKey) continue;
    if (urls.some((u) => other.routesTo(u))) replace(other, rt);
  }
}

function replace(old: FleetRuntime, next: FleetRuntime): void {
  for (const [k, r] of runtimes) if (r === old) runtimes.delete(k);
  old
    .retire(next)
    .catch((err: Error) => next.log.error(`stopping a replaced runtime failed: ${err.message}`));
}
