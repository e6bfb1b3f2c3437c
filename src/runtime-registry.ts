/**
 * One runtime per `redis` record in this plugin-server process: the plugins configured alike
 * share it, and a record change replaces it (same shared state: at once, keeping its node id;
 * other state: those whose replicas the new one takes over). How a replaced runtime hands over
 * is FleetRuntime.retire's. One that every plugin of its record left for other state and other
 * replicas retires after the lapse grace (`retireIfLeft`, FleetRuntime.retireUnclaimed).
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
 * Records a configuration with no `__plugin_id` or `__seq__` ran on: it cannot be told superseded,
 * so the runtime there is never left by all its plugins (bounded by the records seen, as `replacedBy`).
 */
const unkeyed = new Set<string>();
/** The record a plugin last moved to from each record still current (`retireIfLeft`'s heir). */
const movedTo = new Map<string, string>();
/**
 * Records whose runtime retired because every plugin left them (`retireIfLeft`), until a runtime
 * runs there again: no runtime routes their replicas (bounded by the records seen, as `replacedBy`).
 */
const left = new Set<string>();

/** A `redis` record's key here: its JSON, or '' for the process's own state. */
const recordKey = (redis?: RedisConfig): string => (sharesState(redis) ? JSON.stringify(redis) : '');

/**
 * Whether `redis`'s runtime retired because every plugin left the record: a configuration of it
 * (an old-config instance) then has no runtime here routing its replicas (registration.ts).
 */
export function recordLeft(redis?: RedisConfig): boolean {
  // Through the records that followed it: one replaced on the same state (a changed timeout) and
  // then left is left for its configurations too (test/core/review-left.test.ts).
  for (const k of chainFrom(recordKey(redis))) {
    if (runtimes.has(k)) return false;
    if (left.has(k)) return true;
  }
  return false;
}

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
  const key = recordKey(redis);
  const own = pluginId === undefined ? undefined : newest.get(pluginId);
  const older = seq !== undefined && own !== undefined && seq < own.seq;
  if (seq === undefined || pluginId === undefined) unkeyed.add(key);
  else if (!older) newest.set(pluginId, { seq, key });
  const rt = runtimeOf(key, redis, older ? own : undefined);
  // An older configuration on a runtime of its own record while its plugin's newest runs on
  // another: superseded there from the start, kept for the grace, as one of a plugin that moved
  // away is. A runtime made there again after the one its plugins left retired (another plugin,
  // say its lora-poller, back on the record) knew nothing of the move, and the old-config
  // instance of a log phase registered live, claiming the old replicas for good (review-move).
  if (older && own.key !== key && currentFor(key)?.rt === rt && currentFor(own.key)?.rt !== rt)
    rt.pluginMoved(pluginId!, own.seq);
  // The plugin moved off a record still current (other state: a runtime on the same state was
  // replaced above). Nothing replaces that runtime unless this one routes to its replicas
  // (`claimReplicas`): its configuration there is superseded as a change on it would be, kept
  // for the grace, and the runtime retires once no plugin is left on its record (`retireIfLeft`).
  if (!older && own !== undefined && own.key !== key && seq !== undefined && pluginId !== undefined) {
    const from = currentFor(own.key);
    if (from && from.rt !== rt) {
      from.rt.pluginMoved(pluginId, seq);
      movedTo.set(from.key, key);
    }
  }
  return rt;
}

/** The runtime for record `key`: the current one, or an old configuration's heir, or a new one. */
function runtimeOf(
  key: string,
  redis: RedisConfig | undefined,
  /** Its plugin's newest configuration, when this one is older. */
  newer: { key: string } | undefined,
): FleetRuntime {
  // A record still current runs its configurations, old ones too: sent elsewhere, an old one's
  // replicas would pull this runtime, and the routes still on it, over to where it was sent.
  const rt = runtimes.get(key);
  if (rt) return rt;
  // An older configuration of a plugin than its newest, on a record since replaced (Kong starts
  // an old-config instance for the log phase of a request begun before the reload: plugin.lua
  // 3.9.3 `get_instance_id`), runs where the newest one decides: a runtime of its own record
  // would replace that one, and the node would decide on the record the operator left.
  if (newer) {
    // Its record replaced by one on the same state (a changed timeout: the node and its claims
    // kept) is still that state's: the old configuration runs there, as on a record still
    // current. Sent to its plugin's newest record on other state, it claimed its replicas there
    // and pulled this state's runtime, and a lora-poller still on it, over (review-left).
    const same = currentFor(key);
    if (same && same.rt.stateKey === stateKeyOf(redis)) return same.rt;
    const heir = currentFor(newer.key);
    if (heir) return heir.rt;
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
  movedTo.delete(key);
  left.delete(key);
  next.unclaimed = () => retireIfLeft(next);
  if (same) replace(same, next);
  return next;
}

/**
 * `rt` has no configuration left, live or within its grace: if no plugin's newest configuration
 * is on its record (each moved to another one, on other state and other replicas: nothing
 * replaced it), it retires. Still some plugin's record (a lora-poller's, or one whose router
 * configuration has not registered), or one without a plugin id, it stays.
 */
function retireIfLeft(rt: FleetRuntime): void {
  const keys = [...runtimes].filter(([, r]) => r === rt).map(([k]) => k);
  // Through the records that followed each: a plugin on a record this one replaced on the same
  // state (a lora-poller whose timeout differs from its route's) is still on it (review-left).
  const onIt = (k: string) => currentFor(k)?.rt === rt;
  if (keys.length === 0 || [...unkeyed].some(onIt)) return;
  for (const n of newest.values()) if (onIt(n.key)) return;
  const to = movedTo.get(keys[0]!);
  const heir = to === undefined ? undefined : currentFor(to)?.rt;
  if (!heir || heir === rt) return;
  // One state, one runtime current (`sharedRuntime` replaces it): not expected, but then as any replacement.
  if (heir.stateKey === rt.stateKey) return replace(rt, heir);
  for (const k of keys) {
    runtimes.delete(k);
    movedTo.delete(k);
    replacedBy.set(k, to!);
    left.add(k);
  }
  rt.retireUnclaimed(heir).catch((err: Error) =>
    heir.log.error(`stopping a runtime its plugins left failed: ${err.message}`),
  );
}

/** The current runtime of record `key`, or the one that took it over, through the records that followed it. */
function currentFor(key: string): { key: string; rt: FleetRuntime } | undefined {
  for (const k of chainFrom(key)) {
    const rt = runtimes.get(k);
    if (rt) return { key: k, rt };
  }
  return undefined;
}

/** Record `key`, then each record that replaced the one before (`replacedBy`), each once. */
function* chainFrom(key: string): Generator<string> {
  const seen = new Set<string>();
  for (let k: string | undefined = key; k !== undefined && !seen.has(k); k = replacedBy.get(k)) {
    seen.add(k);
    yield k;
  }
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
