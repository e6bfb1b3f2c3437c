import { AdapterCatalog, type Resolved } from '../adapters/catalog';
import { EVICTION_POLICIES, type EvictionPolicy } from '../adapters/eviction';
import { ROOM_FALLBACK_MS, type AdapterPolicy } from '../adapters/manager';
import { sleep } from '../clock';
import type { RouterConfig } from '../config/router-schema';
import { errors, RouterError } from '../errors';
import type { AdapterRef, ReplicaSpec, ReplicaView, ResidentAdapter } from '../fleet/types';
import { samePath } from '../fleet/memory-store';
import { claimReplicas, type FleetRuntime } from '../runtime';
import { pipelineFor, SchedulingPipeline, toCandidate } from '../scheduler/pipeline';
import { loadCost } from '../scheduler/victims';
import type { Decision, SchedulingContext, SchedulingPolicy, Stage } from '../scheduler/types';
import { spendColdLoad, type ColdLoadBudget } from './cold-budget';
import { allowedMethods, classifyPath, parseBody, promptText } from './request';

export interface RouteRequest {
  path: string;
  /** What `kong.request.get_raw_body()` returned (msgpack bin: a Uint8Array). */
  body: Uint8Array | string | null | undefined;
  /**
   * `kong.request.get_method()`, asked only where the method decides (`/v1/models`, or an
   * inference path without a body): a POST with a body costs no extra PDK call.
   */
  method?: () => Promise<string>;
  /**
   * The consumer Kong identified, if any: asked only when the request would start an adapter
   * load (the cold-load budget), so a resident adapter's request makes no PDK call for it.
   */
  consumer?: () => Promise<string | undefined>;
}

export type RouteOutcome =
  | { kind: 'respond'; status: number; body: unknown; headers: Record<string, string> }
  | {
      kind: 'proxy';
      url: string;
      host: string;
      port: number;
      leaseId: string;
      stage: Stage;
      adapter: string | null;
      /** Rewritten body (llama.cpp: the adapter's `lora` field), if any. */
      body?: string;
    };

/** Kept in `kong.ctx.shared` from access to log: what the log phase needs, and what other plugins may read. */
export interface DecisionRecord {
  lease: string;
  replica: string;
  stage: Stage;
  adapter: string | null;
}

const PROMPT_CHARS = 4096;
const INTERNAL_LOG_EVERY_MS = 10_000;
/** Decisions a cold request retakes because another router placed its adapter first. */
const MAX_PLACEMENT_ROUNDS = 3;

/**
 * The request path for one plugin configuration: classify, schedule, ensure the adapter,
 * pick the target. Everything shared (fleet state, loads, polling) lives in the runtime;
 * this object only holds what its config implies, so Kong may create and drop it freely.
 */
export class RouterService {
  readonly catalog: AdapterCatalog;
  private readonly pipeline: SchedulingPipeline;
  private readonly specs: ReplicaSpec[];
  private readonly urls: string[];
  /** Where Kong's set_target points for each replica (parsed once, not per request). */
  private readonly targets: Map<string, { host: string; port: number }>;
  private readonly policy: SchedulingPolicy;
  private readonly adapterPolicy: AdapterPolicy;
  private readonly ready: Promise<void>;
  private readonly eviction: EvictionPolicy;
  /** Whether placement or eviction looks at the victims a cold load would evict. */
  private readonly weighsVictims: boolean;
  private readonly coldBudget: ColdLoadBudget;
  /** Per error code: when its detail was last logged, and how many were not since. */
  private readonly internalLogged = new Map<string, { at: number; suppressed: number }>();

  /** The runtime decisions go to: the one given, or the one that replaced it (a new `redis` record). */
  private get rt(): FleetRuntime {
    return this.runtime.current();
  }

  constructor(
    readonly config: RouterConfig,
    private readonly runtime: FleetRuntime,
  ) {
    const rt = runtime;
    this.catalog = new AdapterCatalog({
      baseModel: config.base_model,
      adapters: config.adapters,
      pathTemplate: config.adapter_path_template,
      namePattern: config.adapter_name_pattern,
    });
    this.pipeline = new SchedulingPipeline(pipelineFor(config));
    this.specs = config.replicas.map((r) => ({ url: r.url, backend: r.backend, priority: r.priority }));
    this.urls = this.specs.map((s) => s.url);
    this.targets = new Map(this.urls.map((url) => [url, targetOf(url)]));
    this.policy = {
      saturation: {
        targetWaitingPerReplica: config.target_waiting_per_replica,
        kvCeiling: config.kv_ceiling,
      },
      maxLoadedAdapters: config.max_loaded_adapters,
      staleAfterMs: config.stale_after_ms,
    };
    this.adapterPolicy = {
      maxLoadedAdapters: config.max_loaded_adapters,
      loadTimeoutMs: config.load_timeout_ms,
      queueTimeoutMs: config.queue_timeout_ms,
      backoffBaseMs: config.backoff_base_ms,
      backoffMaxMs: config.backoff_max_ms,
      isStatic: (name) => this.catalog.isStatic(name),
      isListed: (name) => this.catalog.isListed(name),
    };
    this.eviction = EVICTION_POLICIES[config.eviction]!;
    this.coldBudget = {
      perMinute: config.cold_loads_per_minute,
      perConsumerPerMinute: config.cold_loads_per_consumer_per_minute,
    };
    this.weighsVictims =
      config.room_wait === 'anywhere' || config.eviction !== 'lru' || config.scorer_weights.victim > 0;
    rt.registerManaged(
      JSON.stringify([config.adapters, config.adapter_path_template, config.adapter_name_pattern]),
      (name, path) => this.catalog.manages(name, path),
    );
    // The placement page names llama.cpp's start-up adapters as clients do, not by file.
    rt.registerNames(
      JSON.stringify(config.adapters),
      (path) => config.adapters.find((a) => a.static && a.path !== undefined && samePath(path, a.path))?.name,
    );
    rt.registerLeaseMaxAge(JSON.stringify(config), config.lease_max_age_ms);
    for (const url of this.urls) {
      rt.registerLimit(url, this.adapterPolicy);
      rt.registerSaturation(url, this.policy.saturation);
    }
    claimReplicas(rt, this.urls);
    this.ready = Promise.all(this.specs.map((s) => rt.store.upsertReplica(s))).then(() => {
      // Polling is what keeps decisions fresh: start it here too, in case lora-poller
      // runs in another process (or not at all).
      rt.poller.start();
    });
  }

  async route(req: RouteRequest): Promise<RouteOutcome> {
    const rt = this.rt;
    try {
      return await rt.decision(() => this.decide(req));
    } catch (err) {
      const e = err instanceof RouterError ? err : errors.internal();
      if (!(err instanceof RouterError))
        this.rt.log.error(`route failed: ${(err as Error).stack ?? String(err)}`);
      else if (e.internal !== undefined) this.logInternal(e.code, e.internal);
      this.rt.metrics.errors.inc({ code: e.code });
      if (e.retryAfterS !== undefined) {
        this.rt.metrics.refusals.inc();
        this.rt.metrics.recent.record('refusals', this.rt.clock.now());
      }
      return { kind: 'respond', status: e.status, body: e.body(), headers: e.headers() };
    }
  }

  /**
   * Where a refusal happened (the replica's URL), for operators: the client's message omits it.
   * At most one line per error code every 10 s, so an overload does not flood the log.
   */
  private logInternal(code: string, detail: string): void {
    const now = this.rt.clock.now();
    const last = this.internalLogged.get(code);
    if (last && now - last.at < INTERNAL_LOG_EVERY_MS) {
      last.suppressed++;
      return;
    }
    const more = last?.suppressed ? ` (and ${last.suppressed} more like it since the last line)` : '';
    this.internalLogged.set(code, { at: now, suppressed: 0 });
    this.rt.log.warn(detail + more);
  }

  /** Log phase: gives the request's in-flight lease back (once) and records passive health. */
  finish(leaseId: string, status: number | undefined): Promise<boolean> {
    return RouterService.release(this.rt, leaseId, status);
  }

  /**
   * The same, for any instance: the log phase may run on an instance other than the one that
   * routed (Kong replaced it on a config change), and leases live in the runtime.
   */
  static async release(rt: FleetRuntime, leaseId: string, status: number | undefined): Promise<boolean> {
    // One store call: the release, passive health (5xx: the replica refused, reset or timed
    // out) and, on 404, forgetting the adapter (the replica restarted or another router
    // unloaded it) so the next request loads it rather than waiting for the next poll.
    const lease = await rt.release(leaseId, status);
    if (!lease) return false;
    // Its adapter went idle there: it can now make room for a request waiting for a slot.
    if (lease.adapterIdle) rt.current().manager.roomChanged.notify();
    return true;
  }

  private async decide(req: RouteRequest): Promise<RouteOutcome> {
    const cls = classifyPath(req.path);
    if (cls === 'admin') {
      throw errors.forbidden('This path manages the replicas and is not available through the gateway.');
    }
    const allow = allowedMethods(cls);
    const bodyless = req.body === undefined || req.body === null || req.body.length === 0;
    if (allow && req.method && (cls === 'models' || bodyless)) {
      const method = (await req.method()).toUpperCase();
      if (!allow.includes(method)) throw errors.methodNotAllowed(method, allow);
    }
    await this.ready;
    if (cls === 'models')
      return {
        kind: 'respond',
        status: 200,
        body: await this.modelList(),
        headers: { 'Content-Type': 'application/json' },
      };
    const parsed = parseBody(req.body, cls, this.config.max_body_bytes);
    const resolved: Resolved = this.catalog.resolve(parsed.model);
    const adapter = resolved.kind === 'base' ? undefined : resolved.adapter;
    const ctx: SchedulingContext = { now: this.rt.clock.now(), policy: this.policy, random: this.rt.random };
    // Residents (the victims a cold load could evict) are read only once a decision needs a
    // load and the configuration weighs victims: a resident adapter's request never pays for them.
    const weighsVictims =
      resolved.kind === 'on-demand' && this.policy.maxLoadedAdapters > 0 && this.weighsVictims;
    let withResidents = false;
    // Decayed frequencies are read only by `eviction: value`.
    if (adapter && this.config.eviction === 'value') this.rt.adapterStats.observe(adapter.name, ctx.now);
    let views = await this.rt.store.views(this.urls, adapter, withResidents);
    views = await this.refreshIfStale(views, adapter, withResidents);
    if (resolved.kind !== 'base' && resolved.discovered && !views.some((v) => v.adapter)) {
      throw errors.modelNotFound(resolved.adapter.name);
    }
    const roomDeadline = ctx.now + this.config.queue_timeout_ms;
    // Only the prefix scorer reads the prompt.
    const prompt = this.config.scorer_weights.prefix > 0 ? promptText(parsed.json, PROMPT_CHARS) : undefined;
    let placementRounds = 0;
    /** Another router's placement of this cold adapter, once a claim lost to it: follow it. */
    let follow: string | undefined;
    for (;;) {
      ctx.now = this.rt.clock.now();
      if (withResidents) this.weighVictims(ctx, views);
      // From here to the claim nothing awaits: the next request sees this one's placement.
      if (adapter) {
        this.rt.manager.overlayClaims(views, adapter.name);
        this.markEvicted(views, adapter.name);
      }
      const followed = follow === undefined ? [] : views.filter((v) => v.url === follow);
      const candidates = followed.length > 0 ? followed : views;
      const decision = this.pipeline.schedule({ kind: resolved.kind, adapter, prompt }, candidates, ctx);
      if (!decision) throw errors.noReplica(adapter ? `adapter '${adapter.name}'` : 'the base model');
      const cold = resolved.kind === 'on-demand' && !decision.replica.holder;
      // A holder only by placement (nobody is loading it there yet) needs the shared placement
      // too: another node may have placed the adapter elsewhere meanwhile.
      const presence = decision.replica.adapter;
      const claim =
        cold || (resolved.kind === 'on-demand' && (presence?.placed || presence?.claimed))
          ? resolved.adapter.name
          : undefined;
      if (cold && weighsVictims && !withResidents) {
        withResidents = true;
        views = await this.rt.store.views(this.urls, adapter, true);
        continue;
      }
      // No replica can start the load now (every adapter busy everywhere): wait for room
      // anywhere, rather than queue behind one replica's busy adapters.
      if (
        cold &&
        withResidents &&
        this.config.room_wait === 'anywhere' &&
        loadCost(decision.replica, ctx) === undefined &&
        ctx.now < roomDeadline
      ) {
        await this.rt.manager.roomChanged.wait(this.rt.clock, ROOM_FALLBACK_MS);
        views = await this.rt.store.views(this.urls, adapter, withResidents);
        continue;
      }
      const url = decision.replica.url;
      if (claim) {
        this.rt.manager.claim(url, claim);
        // Routers sharing the store (other Kong nodes) must agree where a cold adapter goes,
        // or each loads it on the replica it picked.
        const ttl = this.config.queue_timeout_ms + this.config.load_timeout_ms;
        const placedOn = await this.rt.store.claimPlacement(
          claim,
          url,
          this.spreading(cold, views, ctx),
          ctx.now,
          ttl,
        );
        if (placedOn !== url && ++placementRounds <= MAX_PLACEMENT_ROUNDS) {
          // Placed elsewhere first: go there too (if it is one of ours), with fresh views.
          this.rt.manager.unclaim(url, claim);
          if (this.urls.includes(placedOn)) follow = placedOn;
          views = await this.rt.store.views(this.urls, adapter, withResidents);
          continue;
        }
      }
      try {
        return await this.admit(decision, resolved, parsed.json, ctx.victimCost, req.consumer);
      } finally {
        if (claim) {
          this.rt.manager.unclaim(url, claim);
          this.rt.store
            .releasePlacement(claim, url)
            .catch((err: Error) => this.rt.log.warn(`could not release placement: ${err.message}`));
        }
      }
    }
  }

  /**
   * The placement a cold decision overrides on purpose: the adapter's placed replica is up,
   * fresh and saturated, so the rule spreads the adapter to a second replica. A placed replica
   * this router merely cannot judge (no fresh poll yet) is followed, not overridden.
   */
  private spreading(cold: boolean, views: ReplicaView[], ctx: SchedulingContext): string | undefined {
    const placed = cold ? views.find((v) => v.adapter?.placed) : undefined;
    if (!placed) return undefined;
    const c = toCandidate(placed, ctx);
    return c.health === 'up' && !c.stale && c.saturation >= 1 ? c.url : undefined;
  }

  /** Takes the lease, makes sure the adapter is there, and shapes the proxied request. */
  private async admit(
    decision: Decision,
    resolved: Resolved,
    json: Record<string, unknown> | null,
    victimCost?: (v: ResidentAdapter) => number,
    consumer?: () => Promise<string | undefined>,
  ): Promise<RouteOutcome> {
    const replica = decision.replica;
    const adapterName = resolved.kind === 'base' ? null : resolved.adapter.name;
    const leaseId = this.rt.nextLeaseId();
    const held = await this.rt.store.acquire({
      id: leaseId,
      url: replica.url,
      adapter: adapterName,
      at: this.rt.clock.now(),
    });
    // From here on, any failure gives the lease back before it is answered.
    try {
      // The state under the lease, not the decision's: an unload may have begun since the views.
      const state = replica.backend === 'vllm' ? held : replica.adapter?.state;
      if (resolved.kind === 'on-demand' && state !== 'loaded' && state !== 'static') {
        const adapter = resolved.adapter;
        await this.rt.manager.ensure(replica.url, adapter, this.adapterPolicy, victimCost, () =>
          spendColdLoad(this.rt, this.coldBudget, adapter.name, consumer),
        );
      }
      this.rt.metrics.decisions.inc({ stage: decision.stage });
      this.rt.metrics.recent.record('requests', this.rt.clock.now());
      return {
        kind: 'proxy',
        url: replica.url,
        ...this.targets.get(replica.url)!,
        leaseId,
        stage: decision.stage,
        adapter: adapterName,
        body:
          replica.backend === 'llamacpp' && json
            ? llamaBody(json, replica.adapter?.llamaId, replica.llamaIds ?? [])
            : undefined,
      };
    } catch (err) {
      await this.rt.store.release(leaseId, this.rt.clock.now());
      throw err;
    }
  }

  /** Registered holders whose reported residency (newer vLLM) lacks the adapter's weights. */
  private markEvicted(views: ReplicaView[], name: string): void {
    for (const v of views) {
      const held = this.rt.poller.lastLoad.get(v.url)?.residency?.cpu;
      if (held && v.adapter?.state === 'loaded' && !held.includes(name)) v.adapter.evicted = true;
    }
  }

  /**
   * A replica with no fresh snapshot and no recent poll attempt (no poller in this process
   * yet, or it just started): poll it now rather than route blind. Single flight per replica
   * in the poller; bounded by `refresh_timeout_ms`.
   */
  private async refreshIfStale(
    views: ReplicaView[],
    adapter: AdapterRef | undefined,
    withResidents: boolean,
  ): Promise<ReplicaView[]> {
    const now = this.rt.clock.now();
    const stale = (t: number | null) => t === null || now - t > this.config.stale_after_ms;
    const need = views.filter((v) => stale(v.snapshotAt) && stale(v.checkedAt));
    if (need.length === 0) return views;
    const specs = need.map((v) => this.specs.find((s) => s.url === v.url)!);
    await Promise.race([
      Promise.all(specs.map((s) => this.rt.poller.refresh(s))),
      sleep(this.rt.clock, this.config.refresh_timeout_ms),
    ]);
    return this.rt.store.views(this.urls, adapter, withResidents);
  }

  /**
   * Gives placement and eviction what they weigh: the configured policy's cost of each possible
   * victim, from decayed request frequency and how many replicas hold a copy.
   */
  private weighVictims(ctx: SchedulingContext, views: ReplicaView[]): void {
    const copies = new Map<string, number>();
    for (const v of views)
      for (const r of v.residents ?? [])
        if (r.state !== 'unloading') copies.set(r.name, (copies.get(r.name) ?? 0) + 1);
    const now = ctx.now;
    const stats = this.rt.adapterStats;
    const victimCtx = {
      now,
      frequency: (n: string) => stats.frequency(n, now),
      copies: (n: string) => copies.get(n) ?? 1,
    };
    const policy = this.eviction;
    ctx.victimCost = (v) => policy.cost(v, victimCtx);
    ctx.isStatic = (n) => this.catalog.isStatic(n);
  }

  /** What the fleet can serve, in vLLM's `/v1/models` format: one replica would list only its own. */
  private async modelList(): Promise<unknown> {
    const created = Math.floor(Date.now() / 1000);
    const card = (id: string, root: string | null, parent: string | null) => ({
      id,
      object: 'model',
      created,
      owned_by: 'kong-lora-router',
      root,
      parent,
      max_model_len: null,
    });
    const base = this.config.base_model ?? null;
    const data = base ? [card(base, base, null)] : [];
    const seen = new Set<string>(base ? [base] : []);
    for (const a of this.catalog.registered()) {
      seen.add(a.name);
      data.push(card(a.name, a.path ?? null, base));
    }
    const dump = await this.rt.store.dump();
    for (const r of dump.replicas) {
      if (!this.urls.includes(r.url)) continue;
      for (const a of r.adapters) {
        if (seen.has(a.name) || a.state === 'unloading') continue;
        seen.add(a.name);
        data.push(card(a.name, null, base));
      }
    }
    return { object: 'list', data };
  }
}

/** Host and port of a replica URL, as `kong.service.set_target` takes them (IPv6 unbracketed). */
function targetOf(url: string): { host: string; port: number } {
  const u = new URL(url);
  return {
    host: u.hostname.replace(/^\[|\]$/g, ''),
    port: Number(u.port || (u.protocol === 'https:' ? 443 : 80)),
  };
}

/**
 * A llama.cpp request's body: every adapter the replica lists, with an explicit scale (1 for
 * the requested one, 0 for the others; all 0 for the base model). Builds differ on what an empty
 * or partial list means (older: unlisted at 0; current: an empty list is no field, so the global
 * scales apply, llama.cpp issue 28674; newest: unlisted keep their global scale), and a full
 * list means the same on all of them. The client's own `lora` is replaced.
 */
function llamaBody(json: Record<string, unknown>, llamaId: number | undefined, ids: number[]): string {
  try {
    const all = llamaId === undefined || ids.includes(llamaId) ? ids : [...ids, llamaId];
    return JSON.stringify({ ...json, lora: all.map((id) => ({ id, scale: id === llamaId ? 1.0 : 0.0 })) });
  } catch {
    // V8 parses nesting it cannot serialise again.
    throw errors.badRequest('The request body is nested too deeply.', 'invalid_json');
  }
}
