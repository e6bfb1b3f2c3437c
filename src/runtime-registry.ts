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
 * Each plugin's newest configuration seen (Kong's `__plugin_id`): its `__seq__` (node-wide,
 * growing: plugins_iterator.lua `get_plugin_config`) and its record. Only a configuration older
 * than its own plugin's newest is an old-config instance: Kong gives every plugin a new `__seq__`
 * at each rebuild, in the iterator's order and per worker, so another plugin's newer configuration
 * says nothing of this one's age. Bounded by Kong's plugin entities.
 */
const newest = new Map<string, { seq: number; key: string }>();
/** A replaced record's successor, by record (strings: no replaced runtime is kept alive by it). */
const replacedBy = new Map<string, string>();

/**
 * The runtime of this plugin-server process for a plugin's `redis` record, created on first
 * use: lora-router and lora-poller configured alike share it, whatever instances Kong creates.
 * A new record on the same shared state (a changed timeout, say) replaces the runtime at once
 * and keeps its node id; one on other state replaces those whose replicas it takes over.
 */
export function sharedRuntime(
  redis?: RedisConfig,
  /** Kong's `__seq__` of the configuration, if sent. */
  seq?: number,
  /** Kong's `__plugin_id`, if sent. */
  pluginId?: string,
): FleetRuntime {
  const key = sharesState(redis) ? JSON.stringify(redis) : '';
  const own = pluginId === undefined ? undefined : newest.get(pluginId);
  const older = seq !== undefined && own !== undefined && seq < own.seq;
  if (!older && seq !== undefined && pluginId !== undefined) newest.set(pluginId, { seq, key });
  // A record still current runs its configurations, old ones too: sent elsewhere, an old one's
  // replicas would pull this runtime, and the routes still on it, over to where it was sent.
  const rt = runtimes.get(key);
  if (rt) return rt;
  // An older configuration of a plugin than its newest, on a record since replaced (Kong starts
  // an old-config instance for the log phase of a request begun before the reload: plugin.lua
  // 3.9.3 `get_instance_id`), runs where the newest one decides: a runtime of its own record
  // would replace that one, and the node would decide on the record the operator left.
  if (older) {
    const heir = runtimes.get(own.key) ?? successorOf(own.key);
    if (heir) return heir;
  }
  const stateKey = stateKeyOf(redis);
  const same = [...runtimes.values()].find((r) => r.stateKey === stateKey);
  const next = new FleetRuntime({
    redis: key === '' ? undefined : redis,
    leasePrefix: same?.leasePrefix,
    leaseSeq: same?.leaseSeq,
    log: operatorLog,
  });
  runtimes.set(key, next);
  replacedBy.delete(key);
  if (same) replace(same, next);
  return next;
}

/** The current runtime that took over replaced record `key`, through the records that followed it. */
function successorOf(key: string): FleetRuntime | undefined {
  const seen = new Set<string>();
  for (let k = replacedBy.get(key); k !== undefined && !seen.has(k); k = replacedBy.get(k)) {
    const rt = runtimes.get(k);
    if (rt) return rt;
    seen.add(k);
  }
  return undefined;
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
  const nextKey = [...runtimes].find(([, r]) => r === next)?.[0];
  for (const [k, r] of runtimes)
    if (r === old) {
      runtimes.delete(k);
      if (nextKey !== undefined) replacedBy.set(k, nextKey);
    }
  old
    .retire(next)
    .catch((err: Error) => next.log.error(`stopping a replaced runtime failed: ${err.message}`));
}
