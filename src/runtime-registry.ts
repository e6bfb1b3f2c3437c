/**
 * One runtime per `redis` record in this plugin-server process: the plugins configured alike
 * share it, and a record change replaces it (same shared state: at once, keeping its node id;
 * other state: those whose replicas the new one takes over). How a replaced runtime hands over
 * is FleetRuntime.retire's. One that every plugin of its record left for other state and other
 * replicas retires after the lapse grace (`retireIfLeft`, FleetRuntime.retireUnclaimed).
 */
import { sharesState, stateKeyOf, type RedisConfig } from './config/redis-schema';
import { operatorLog, type Logger } from './log';
import { FleetRuntime } from './runtime';

/**
 * What a registry makes a record's runtime from: the record (undefined: the process's own state),
 * the lease prefix and sequence of the runtime on the same state it replaces (a changed timeout
 * keeps the node id), and the operator log. The plugins' registry builds a plain FleetRuntime;
 * the simulation (dst/node-processes.ts) one on its modelled Redis and replicas.
 */
export type RuntimeFactory = (o: {
  redis: RedisConfig | undefined;
  leasePrefix: string | undefined;
  leaseSeq: { next: number } | undefined;
  log: Logger;
}) => FleetRuntime;

/** The registry that made each runtime (registration.ts asks it of the runtime it registers on). */
const registryOf = new WeakMap<FleetRuntime, RuntimeRegistry>();

/** A `redis` record's key here: its JSON, or '' for the process's own state. */
const recordKey = (redis?: RedisConfig): string => (sharesState(redis) ? JSON.stringify(redis) : '');

/**
 * The runtimes of one plugin-server process (module state of the plugins' process: `defaultRegistry`;
 * one per simulated process in dst/).
 */
export class RuntimeRegistry {
  private readonly create: RuntimeFactory;
  private readonly log: Logger;

  constructor(o: { create?: RuntimeFactory; log?: Logger } = {}) {
    this.create = o.create ?? ((r) => new FleetRuntime(r));
    this.log = o.log ?? operatorLog;
  }

  /** This process's current runtimes, by `redis` record (one without Redis). */
  private readonly runtimes = new Map<string, FleetRuntime>();
  /**
   * Each plugin's newest configuration seen (Kong's `__plugin_id`): its `__seq__` (node-wide,
   * growing: plugins_iterator.lua `get_plugin_config`) and its record. Only a configuration older
   * than its own plugin's newest is an old-config instance: Kong gives every plugin a new `__seq__`
   * at each rebuild, in the iterator's order and per worker, so another plugin's newer configuration
   * says nothing of this one's age. Bounded by Kong's plugin entities.
   */
  private readonly newest = new Map<string, { seq: number; key: string; state: string }>();
  /** A replaced record's successor, by record (strings: no replaced runtime is kept alive by it). */
  private readonly replacedBy = new Map<string, string>();
  /**
   * Records a configuration with no `__plugin_id` or `__seq__` ran on: it cannot be told superseded,
   * so the runtime there is never left by all its plugins (bounded by the records seen, as `replacedBy`).
   */
  private readonly unkeyed = new Set<string>();
  /** The record a plugin last moved to from each record still current (`retireIfLeft`'s heir). */
  private readonly movedTo = new Map<string, string>();
  /**
   * Records whose runtime retired because every plugin left them (`retireIfLeft`), until a runtime
   * runs there again: no runtime routes their replicas (bounded by the records seen, as `replacedBy`).
   */
  private readonly left = new Set<string>();

  /**
   * Whether `redis`'s runtime retired because every plugin left the record: a configuration of it
   * (an old-config instance) then has no runtime here routing its replicas (registration.ts).
   */
  recordLeft(redis?: RedisConfig): boolean {
    // Through the records that followed it: one replaced on the same state (a changed timeout) and
    // then left is left for its configurations too (test/core/review-left.test.ts).
    for (const k of this.chainFrom(recordKey(redis))) {
      if (this.runtimes.has(k)) return false;
      if (this.left.has(k)) return true;
    }
    return false;
  }

  /**
   * The runtime of this plugin-server process for a plugin's `redis` record, created on first
   * use: lora-router and lora-poller configured alike share it, whatever instances Kong creates.
   * A new record on the same shared state (a changed timeout, say) replaces the runtime at once
   * and keeps its node id; one on other state replaces those whose replicas it takes over.
   */
  sharedRuntime(
    redis?: RedisConfig,
    /** Kong's `__seq__` of the configuration, if sent. */
    seq?: number,
    /** Kong's `__plugin_id`, if sent. */
    pluginId?: string,
  ): FleetRuntime {
    const key = recordKey(redis);
    const own = pluginId === undefined ? undefined : this.newest.get(pluginId);
    const older = seq !== undefined && own !== undefined && seq < own.seq;
    if (seq === undefined || pluginId === undefined) this.unkeyed.add(key);
    else if (!older) this.newest.set(pluginId, { seq, key, state: stateKeyOf(redis) });
    const rt = this.runtimeOf(key, redis, older ? own : undefined);
    // An older configuration on a runtime of its own record while its plugin's newest runs on
    // another: superseded there from the start, kept for the grace, as one of a plugin that moved
    // away is. A runtime made there again after the one its plugins left retired (another plugin,
    // say its lora-poller, back on the record) knew nothing of the move, and the old-config
    // instance of a log phase registered live, claiming the old replicas for good (review-move).
    if (older && own.key !== key && this.currentFor(key)?.rt === rt && this.currentFor(own.key)?.rt !== rt)
      rt.pluginMoved(pluginId!, own.seq);
    // The plugin moved off a record still current (other state: a runtime on the same state was
    // replaced above). Nothing replaces that runtime unless this one routes to its replicas
    // (`claimReplicas`): its configuration there is superseded as a change on it would be, kept
    // for the grace, and the runtime retires once no plugin is left on its record (`retireIfLeft`).
    if (!older && own !== undefined && own.key !== key && seq !== undefined && pluginId !== undefined) {
      const from = this.currentFor(own.key);
      if (from && from.rt !== rt) {
        from.rt.pluginMoved(pluginId, seq);
        this.movedTo.set(from.key, key);
      }
    }
    return rt;
  }

  /** The runtime for record `key`: the current one, or an old configuration's heir, or a new one. */
  private runtimeOf(
    key: string,
    redis: RedisConfig | undefined,
    /** Its plugin's newest configuration, when this one is older. */
    newer: { key: string } | undefined,
  ): FleetRuntime {
    // A record still current runs its configurations, old ones too: sent elsewhere, an old one's
    // replicas would pull this runtime, and the routes still on it, over to where it was sent.
    const rt = this.runtimes.get(key);
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
      const same = this.currentFor(key);
      if (same && same.rt.stateKey === stateKeyOf(redis)) return same.rt;
      const heir = this.currentFor(newer.key);
      if (heir) return heir.rt;
    }
    const stateKey = stateKeyOf(redis);
    const same = [...this.runtimes.values()].find((r) => r.stateKey === stateKey);
    const next = this.create({
      redis: key === '' ? undefined : redis,
      leasePrefix: same?.leasePrefix,
      leaseSeq: same?.leaseSeq,
      log: this.log,
    });
    registryOf.set(next, this);
    this.runtimes.set(key, next);
    this.replacedBy.delete(key);
    this.movedTo.delete(key);
    this.left.delete(key);
    next.unclaimed = () => this.retireIfLeft(next);
    if (same) this.replace(same, next);
    return next;
  }

  /**
   * `rt` has no configuration left, live or within its grace: if no plugin's newest configuration
   * is on its record (each moved to another one, on other state and other replicas: nothing
   * replaced it), it retires. Still some plugin's record (a lora-poller's, or one whose router
   * configuration has not registered), or one without a plugin id, it stays.
   */
  private retireIfLeft(rt: FleetRuntime): void {
    const keys = [...this.runtimes].filter(([, r]) => r === rt).map(([k]) => k);
    // Through the records that followed each: a plugin on a record this one replaced on the same
    // state (a lora-poller whose timeout differs from its route's) is still on it (review-left).
    const onIt = (k: string) => this.currentFor(k)?.rt === rt;
    if (keys.length === 0 || [...this.unkeyed].some(onIt)) return;
    // Only a record on its own state: one on other state whose runtime this one took over (a change
    // of another plugin there to this state and the same replicas: `claimReplicas`) names other
    // state, and kept it for good once that plugin left too (simulation seed 3402203: a lora-poller
    // on the old record, its route moved back to that state, held a runtime on the other one).
    for (const n of this.newest.values()) if (n.state === rt.stateKey && onIt(n.key)) return;
    const to = this.movedTo.get(keys[0]!);
    const heir = to === undefined ? undefined : this.currentFor(to)?.rt;
    if (!heir || heir === rt) return;
    // One state, one runtime current (`sharedRuntime` replaces it): not expected, but then as any replacement.
    if (heir.stateKey === rt.stateKey) return this.replace(rt, heir);
    // The plugins whose record leads here from other state (that lora-poller) lead to the heir
    // from now on: their polling settings go with them, or the heir polls at its own interval
    // while their `/status` reads it (test/core/left-poller-settings.test.ts).
    for (const [id, n] of this.newest) if (onIt(n.key)) rt.passPollingOf(id, heir);
    for (const k of keys) {
      this.runtimes.delete(k);
      this.movedTo.delete(k);
      this.replacedBy.set(k, to!);
      this.left.add(k);
    }
    rt.retireUnclaimed(heir).catch((err: Error) =>
      heir.log.error(`stopping a runtime its plugins left failed: ${err.message}`),
    );
  }

  /** The current runtime of record `key`, or the one that took it over, through the records that followed it. */
  private currentFor(key: string): { key: string; rt: FleetRuntime } | undefined {
    for (const k of this.chainFrom(key)) {
      const rt = this.runtimes.get(k);
      if (rt) return { key: k, rt };
    }
    return undefined;
  }

  /** Record `key`, then each record that replaced the one before (`replacedBy`), each once. */
  private *chainFrom(key: string): Generator<string> {
    const seen = new Set<string>();
    for (let k: string | undefined = key; k !== undefined && !seen.has(k); k = this.replacedBy.get(k)) {
      seen.add(k);
      yield k;
    }
  }

  /**
   * A router configuration on `rt` routes to `urls`: runtimes of other records that route to
   * any of them step down for `rt` (one process, one view of a replica, or loads would collide).
   */
  claimReplicas(rt: FleetRuntime, urls: readonly string[]): void {
    for (const other of [...this.runtimes.values()]) {
      if (other === rt || other.stateKey === rt.stateKey) continue;
      if (urls.some((u) => other.routesTo(u))) this.replace(other, rt);
    }
  }

  private replace(old: FleetRuntime, next: FleetRuntime): void {
    const nextKey = [...this.runtimes].find(([, r]) => r === next)?.[0];
    for (const [k, r] of this.runtimes)
      if (r === old) {
        this.runtimes.delete(k);
        if (nextKey !== undefined) this.replacedBy.set(k, nextKey);
      }
    old
      .retire(next)
      .catch((err: Error) => next.log.error(`stopping a replaced runtime failed: ${err.message}`));
  }
}

/** The plugins' registry: one per plugin-server process (module state, as Kong runs one per process). */
const defaultRegistry = new RuntimeRegistry();

/** The registry that made `rt`, or the plugins' one (a runtime a test built itself). */
export function registryFor(rt: FleetRuntime): RuntimeRegistry {
  return registryOf.get(rt) ?? defaultRegistry;
}

/** RuntimeRegistry.sharedRuntime of the plugins' registry. */
export function sharedRuntime(redis?: RedisConfig, seq?: number, pluginId?: string): FleetRuntime {
  return defaultRegistry.sharedRuntime(redis, seq, pluginId);
}
