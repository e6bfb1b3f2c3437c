import type { RouterConfig } from '../config/router-schema';

/**
 * The objective and priority a request carries: from its class (`slo_classes`), named by the
 * request's objective header, else its consumer's class (`consumer_slo_class`), else
 * `default_slo_class`.
 *
 * The headers are llm-d's (kubernetes-sigs/gateway-api-inference-extension v1.5.0):
 * - `x-gateway-inference-objective` names an InferenceObjective, whose priority the request
 *   takes; an unknown name gets the default (pkg/epp/metadata/consts.go `ObjectiveKey`,
 *   pkg/epp/requestcontrol/director.go `getInferenceObjective`). Here it names a class.
 * - `x-slo-ttft-ms` is the request's own TTFT objective, milliseconds; a value that is not a
 *   positive number is no objective (pkg/epp/framework/plugins/requestcontrol/admitter/latencyslo/
 *   plugin.go `parseFloatHeaderValue`). `x-slo-tpot-ms` is not read: the router predicts no TPOT.
 * - Sheddable means priority < 0 (pkg/epp/util/request/sheddable.go `IsSheddable`).
 */
export const OBJECTIVE_HEADER = 'x-gateway-inference-objective';
export const TTFT_HEADER = 'x-slo-ttft-ms';

/** What the plugin read of the request: plain values, no PDK. */
export interface SloHints {
  /** The objective header's value. */
  objective?: string;
  /** The `x-slo-ttft-ms` header's value. */
  ttftMs?: string;
  /** The consumer Kong identified: its username and id, as `consumer_slo_class` may key it. */
  consumer?: { id?: string; username?: string };
}

/** One request's objective, as the room wait (src/router/room-wait.ts) holds, delays and sheds by it. */
export interface RequestSlo {
  /** The class's name, or '' for a request with no class. */
  name: string;
  /** Its time-to-first-token objective (ms). */
  objectiveMs: number;
  priority: number;
  /** Priority < 0: refused first when the fleet cannot meet its objective. */
  sheddable: boolean;
  /**
   * The queue it may join (ms): the least objective of any class of higher priority, if below its
   * own. A request of a lower class sent into a queue longer than that would stand ahead of a
   * higher class's request past that request's objective, so it waits in the gateway instead.
   */
  gateMs: number;
  /**
   * Its class's `max_in_flight`: it joins a replica only while fewer than this many of the router's
   * requests are in flight there (0 or absent: no bound), for up to half its objective (room-wait.ts).
   */
  maxInFlight?: number;
  /**
   * Its class may join only queues shorter than its objective (a class above has a tighter one): it
   * waits while a request of a higher class is held (room-wait.ts). The class's, whatever
   * `x-slo-ttft-ms` says: a client objective at the gate took a batch request out of that wait.
   */
  behindHigher?: boolean;
  /**
   * The class's own objective, when `x-slo-ttft-ms` set `objectiveMs`: a refusal at the end of a
   * hold reads the run of late hold-ends by the class's hold, not the client's (room-wait.ts).
   */
  classObjectiveMs?: number;
}

/** Upper bound on `x-slo-ttft-ms` (the schema's bound on `ttft_ms`). */
const MAX_OBJECTIVE_MS = 600_000;

type ClassConfig = Pick<
  RouterConfig,
  'slo_classes' | 'default_slo_class' | 'consumer_slo_class' | 'ttft_slo_ms'
>;

/** The classes of one configuration, resolved per request. */
export class SloClasses {
  private readonly byName: Map<string, RequestSlo>;
  private readonly fallback: RequestSlo;
  /** Per priority: the least objective of the classes above it (Infinity: none). */
  private readonly above = new Map<number, number>();

  constructor(private readonly config: ClassConfig) {
    const classes = config.slo_classes;
    const aboveOf = (p: number) => Math.min(...classes.filter((o) => o.priority > p).map((o) => o.ttft_ms));
    for (const p of [0, ...classes.map((c) => c.priority)]) this.above.set(p, aboveOf(p));
    const slo = (name: string, objectiveMs: number, priority: number, maxInFlight = 0): RequestSlo => ({
      name,
      objectiveMs,
      priority,
      sheddable: priority < 0,
      gateMs: Math.min(objectiveMs, this.above.get(priority)!),
      maxInFlight,
      behindHigher: this.above.get(priority)! < objectiveMs,
    });
    this.byName = new Map(
      classes.map((c) => [c.name, slo(c.name, c.ttft_ms, c.priority, c.max_in_flight ?? 0)]),
    );
    const named =
      config.default_slo_class === undefined ? undefined : this.byName.get(config.default_slo_class);
    // No default class: priority 0 and `ttft_slo_ms`, behind any class of higher priority.
    this.fallback = named ?? slo('', config.ttft_slo_ms, 0);
  }

  /** Whether any class is configured: only then does the plugin read headers or the consumer for it. */
  get enabled(): boolean {
    return this.config.slo_classes.length > 0;
  }

  /**
   * The request's class: the one its header names, if that is no higher in priority than its
   * default (its consumer's, else `default_slo_class`): a client may lower its own priority,
   * never raise it above what the operator gave its consumer. `x-slo-ttft-ms` then sets its
   * objective (never its priority).
   */
  resolve(h: SloHints): RequestSlo {
    const byConsumer = h.consumer ? this.consumerClass(h.consumer) : undefined;
    const base = byConsumer ?? this.fallback;
    const asked = h.objective === undefined ? undefined : this.byName.get(h.objective.trim());
    const chosen = asked && asked.priority <= base.priority ? asked : base;
    const own = Number(h.ttftMs);
    if (h.ttftMs === undefined || !(own > 0)) return chosen;
    // At least 1 ms (the schema's least `ttft_ms`): rounded to 0, a positive value such as 0.4
    // made an objective of none, so the request was never held, gated or shed.
    const objectiveMs = Math.max(1, Math.min(Math.round(own), MAX_OBJECTIVE_MS));
    return {
      ...chosen,
      objectiveMs,
      gateMs: Math.min(objectiveMs, this.above.get(chosen.priority)!),
      classObjectiveMs: chosen.objectiveMs,
    };
  }

  private consumerClass(c: { id?: string; username?: string }): RequestSlo | undefined {
    const map = this.config.consumer_slo_class;
    // Own keys only: a username such as `constructor` read Object.prototype's member, which hid
    // the class the consumer's id maps to.
    const name =
      (c.username !== undefined && Object.hasOwn(map, c.username) ? map[c.username] : undefined) ??
      (c.id !== undefined && Object.hasOwn(map, c.id) ? map[c.id] : undefined);
    return name === undefined ? undefined : this.byName.get(name);
  }
}

/**
 * The requests of each priority held in the gateway now (one plugin configuration, one process):
 * a request of a lower class does not go while one of a higher class waits, or it would take the
 * room the higher one waits for (both are decided again on the same signal).
 */
export class HeldClasses {
  private readonly count = new Map<number, number>();
  /** The last hold that ended late (`lateHoldEnds`), and the first of its run. */
  private lastLateEnd?: number;
  private lateSince = 0;

  /**
   * `refusalBacklog`: from this many held, the end of a hold may refuse (see `backlogged`). The
   * router sets three times its replicas: each replica whose queue falls under the gate takes
   * about one held request, so that is three rounds of them.
   */
  constructor(private readonly refusalBacklog = Infinity) {}

  enter(priority: number): void {
    this.count.set(priority, (this.count.get(priority) ?? 0) + 1);
  }

  leave(priority: number): void {
    const n = (this.count.get(priority) ?? 0) - 1;
    if (n > 0) this.count.set(priority, n);
    else this.count.delete(priority);
  }

  /**
   * Whether `refusalBacklog` or more requests of priority `priority` or higher are held (a held one
   * asking counts itself): a backlog in the gateway, not one replica's burst. Three rounds, not
   * two: at two, the long workload with 300 ms loads at 90% load (seeds 1-3,
   * bench/des/peer-gap.ts) refused up to 12 requests in 1,000 where none was, its p99 request
   * then never answered; at three, 4 at most, and the overloaded points kept most of their gain.
   */
  backlogged(priority: number): boolean {
    return this.heldAbove(priority) >= this.refusalBacklog;
  }

  /** Requests held of priority `priority` or above. */
  private heldAbove(priority: number): number {
    let n = 0;
    for (const [p, k] of this.count) if (p >= priority) n += k;
    return n;
  }

  /**
   * A hold ended at `now` with every replica still predicted past the objective (a late send, or
   * a refusal). Returns how long such hold-ends have come without a gap of `holdMs` (one hold),
   * 0 for the first: how long the overload has outlasted the holds. A burst or the cold start
   * ends a few seconds of them (bursty workload, 1 s loads, 50% load: 25-28 s into the run); a
   * sustained overload keeps them coming for minutes (long workload: 60-300 s and more).
   */
  lateHoldEnds(now: number, holdMs: number): number {
    if (this.lastLateEnd === undefined || now - this.lastLateEnd > holdMs) this.lateSince = now;
    this.lastLateEnd = now;
    return now - this.lateSince;
  }

  /** Whether a request of higher priority than `priority` is held. */
  above(priority: number): boolean {
    for (const p of this.count.keys()) if (p > priority) return true;
    return false;
  }
}

/**
 * Per runtime, per configuration (its fields as JSON): the requests held in the gateway, while
 * something still holds them (an instance of the configuration, a request of one). Weakly: a
 * fleet whose replicas join and leave changes the configuration each time, and a count kept by
 * every configuration the process ever ran grew by one, keyed by its whole JSON, per change.
 */
const heldByRuntime = new WeakMap<object, Map<string, WeakRef<HeldClasses>>>();

/**
 * The held requests of `config` on `runtime`, one count for every plugin instance of it there:
 * Kong's nginx workers each start their own instance of a config (kong-pdk 0.6.0 server.js
 * `StartInstance`: a new plugin object each), all on the process's one runtime. Counted per
 * instance, a worker's batch request did not wait behind another worker's held interactive
 * requests, nor did their holds' ends read one backlog. Separate runtimes (the simulations' Kong nodes) count
 * apart. A refusal at the end of a hold reads a backlog of three times the replicas (`backlogged`).
 * A count nothing holds any more (no instance, no request) is collected: no request is held there,
 * and its run of late hold-ends starts again, as a changed configuration's does.
 */
export function heldOn(runtime: object, config: Pick<RouterConfig, 'replicas'>): HeldClasses {
  let byConfig = heldByRuntime.get(runtime);
  if (!byConfig) heldByRuntime.set(runtime, (byConfig = new Map()));
  const key = JSON.stringify(config);
  let held = byConfig.get(key)?.deref();
  if (!held) {
    // A configuration new here (or back): those whose counts were collected go first.
    for (const [k, ref] of byConfig) if (ref.deref() === undefined) byConfig.delete(k);
    byConfig.set(key, new WeakRef((held = new HeldClasses(3 * config.replicas.length))));
  }
  return held;
}

/** The configurations whose held counts `runtime` keeps (tests). */
export function heldConfigsOn(runtime: object): number {
  return heldByRuntime.get(runtime)?.size ?? 0;
}
