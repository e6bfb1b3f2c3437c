import { AdapterCatalog, type Resolved } from '../adapters/catalog';
import { EVICTION_POLICIES } from '../adapters/eviction';
import type { AdapterPolicy } from '../adapters/manager';
import { sleep } from '../clock';
import type { RouterConfig } from '../config/router-schema';
import { errors, RouterError } from '../errors';
import type { AdapterRef, ReplicaSpec, ReplicaView, ResidentAdapter } from '../fleet/types';
import { samePath } from '../fleet/memory-store';
import { LeaseHandle, LeaseNotOpen } from '../lease';
import type { FleetRuntime } from '../runtime';
import { claimReplicas } from '../runtime-registry';
import { pipelineFor, SchedulingPipeline } from '../scheduler/pipeline';
import type { Decision, SchedulingContext, SchedulingPolicy, Stage } from '../scheduler/types';
import { spendColdLoad, type ColdLoadBudget } from './cold-budget';
import { modelList } from './model-list';
import { Placement } from './placement';
import { allowedMethods, classifyPath, modelIdOf, parseBody, promptText, type PathClass } from './request';
import { RoomWait } from './room-wait';
import { canServe } from '../scheduler/filters/eligibility';
import { loadCost } from '../scheduler/victims';
import { estimateTokens, type TokenEstimate } from '../work/estimate';
import { predictTtft } from '../work/predict';
import { DEFAULT_MAX_TOKENS } from '../work/work-model';

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
      /** The replica is served over TLS: the Service's scheme must become https. */
      https: boolean;
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

/**
 * The request path for one plugin configuration: classify, schedule, ensure the adapter,
 * pick the target. Everything shared (fleet state, loads, polling) lives in the runtime;
 * this object only holds what its config implies, so Kong may create and drop it freely.
 */
export class RouterService {
  readonly catalog: AdapterCatalog;
  private readonly placement: Placement;
  private readonly specs: ReplicaSpec[];
  private readonly urls: string[];
  /** Where Kong's set_target points for each replica (parsed once, not per request). */
  private readonly targets: Map<string, ReturnType<typeof targetOf>>;
  private readonly policy: SchedulingPolicy;
  private readonly adapterPolicy: AdapterPolicy;
  private readonly ready: Promise<void>;
  private readonly coldBudget: ColdLoadBudget;
  /** Per error code: when its detail was last logged, and how many were not since. */
  private readonly internalLogged = new Map<string, { at: number; suppressed: number }>();

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
      saturationMode: config.saturation_mode,
      saturationMarginMs: config.saturation_margin_ms,
      ttftToleranceMs: config.ttft_tolerance_ms,
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
    this.coldBudget = {
      perMinute: config.cold_loads_per_minute,
      perConsumerPerMinute: config.cold_loads_per_consumer_per_minute,
    };
    this.placement = new Placement({
      pipeline: new SchedulingPipeline(pipelineFor(config)),
      // Once a request waits for room anywhere (`escalate`, after its wait on the chosen replica).
      roomPipeline: new SchedulingPipeline(pipelineFor({ ...config, room_wait: 'anywhere' })),
      urls: this.urls,
      config,
      eviction: EVICTION_POLICIES[config.eviction]!,
      isStatic: (n) => this.catalog.isStatic(n),
      weighsVictims:
        config.room_wait !== 'replica' || config.eviction !== 'lru' || config.scorer_weights.victim > 0,
    });
    rt.registerManaged(
      JSON.stringify([config.adapters, config.adapter_path_template, config.adapter_name_pattern]),
      (name, path) => this.catalog.manages(name, path),
    );
    // The placement page names llama.cpp's start-up adapters as clients do, not by file.
    rt.registerNames(
      JSON.stringify(config.adapters),
      (path) => config.adapters.find((a) => a.static && a.path !== undefined && samePath(path, a.path))?.name,
    );
    for (const url of this.urls)
      rt.registerReplica(url, {
        limit: this.adapterPolicy,
        saturation: {
          ...this.policy.saturation,
          predictedMarginMs: config.saturation_mode === 'predicted' ? config.saturation_margin_ms : undefined,
        },
        leaseMaxAgeMs: config.lease_max_age_ms,
      });
    claimReplicas(rt, this.urls);
    rt.work.configure(config.prefill_tokens_per_second);
    if (config.saturation_mode === 'predicted') rt.predictsWork = true;
    this.ready = Promise.all(this.specs.map((s) => rt.store.upsertReplica(s))).then(() => {
      // Polling is what keeps decisions fresh: start it here too, in case lora-poller
      // runs in another process (or not at all). On the runtime current now: a `redis` record
      // change during the registration retired `rt`, and a poller started there would poll a
      // closed store for the rest of the process (the 30-minute fault run's silent nodes).
      rt.current().poller.start();
    });
  }

  /**
   * One decision, on one runtime from start to end: the one current when the request came (a
   * `redis` record change meanwhile sends only later requests to the new one). Its lease is taken,
   * and given back, there.
   */
  async route(req: RouteRequest): Promise<RouteOutcome> {
    const rt = this.runtime.current();
    const wait = new RoomWait(this.config, rt.clock.now());
    try {
      return await rt.decision(() => this.decide(rt, req, wait));
    } catch (err) {
      const e = err instanceof RouterError ? err : errors.internal();
      if (!(err instanceof RouterError)) rt.log.error(`route failed: ${(err as Error).stack ?? String(err)}`);
      else if (e.internal !== undefined) this.logInternal(rt, e.code, e.internal);
      rt.metrics.errors.inc({ code: e.code });
      if (e.retryAfterS !== undefined) {
        rt.metrics.refusals.inc();
        rt.metrics.recent.record('refusals', rt.clock.now());
      }
      return { kind: 'respond', status: e.status, body: e.body(), headers: e.headers() };
    }
  }

  /**
   * Where a refusal happened (the replica's URL), for operators: the client's message omits it.
   * At most one line per error code every 10 s, so an overload does not flood the log.
   */
  private logInternal(rt: FleetRuntime, code: string, detail: string): void {
    const now = rt.clock.now();
    const last = this.internalLogged.get(code);
    if (last && now - last.at < INTERNAL_LOG_EVERY_MS) {
      last.suppressed++;
      return;
    }
    const more = last?.suppressed ? ` (and ${last.suppressed} more like it since the last line)` : '';
    this.internalLogged.set(code, { at: now, suppressed: 0 });
    rt.log.warn(detail + more);
  }

  /**
   * Log phase: gives the request's in-flight lease back and records passive health. False when
   * no lease with this id is open in this process (given back already, reclaimed by age).
   */
  async finish(leaseId: string, status: number | undefined): Promise<boolean> {
    const lease = LeaseHandle.find(leaseId);
    return lease ? RouterService.release(lease, status) : false;
  }

  /**
   * The same, for any instance: the log phase may run on an instance other than the one that
   * routed (Kong replaced it on a config change); the lease knows the runtime it was taken on.
   * It sees no TTFT (Kong's latencies.proxy is time to response headers, which vLLM streams at
   * once): the work model learns its rates from the replicas' histograms, through the poll.
   * Throws LeaseNotOpen if the lease was given back already.
   */
  static async release(lease: LeaseHandle, status: number | undefined): Promise<boolean> {
    // A 404 is vLLM's "The model `x` does not exist." when it lost the adapter (a restart,
    // another router's unload; serving_engine.py `_check_model`, vLLM v0.11.0), or FastAPI's
    // `{"detail":"Not Found"}` for a client's mistyped path under /v1 (llama.cpp: "File Not
    // Found", tools/server/server-http.cpp, llama.cpp aa6192d38d). The log phase has the status,
    // never the body (no `response` phase: docs/kong.md), so a 404 forgets nothing by itself:
    // the replica's registry, read afresh, decides.
    const lost = status === 404;
    // One store call: the release and passive health (5xx: the replica refused, reset or timed
    // out). Its work ends with it, whatever the store answers (an expired lease is gone there).
    const released = await lease.release(lost ? undefined : status);
    if (!released) return false;
    // Its adapter went idle there: it can now make room for a request waiting for a slot, on
    // the runtime it was taken on or the one deciding now.
    const now = lease.rt.current();
    if (released.adapterIdle) {
      lease.rt.manager.roomChanged.notify();
      if (now !== lease.rt) now.manager.roomChanged.notify();
    }
    // Polled afresh (after any poll under way, which may have read the registry before the
    // 404): the reconciliation forgets what the registry no longer lists, and only that.
    if (lost && released.adapter !== null) await now.poller.refreshUrl(released.url, true);
    return true;
  }

  /**
   * The log phase of a routed request: its lease first (it knows the runtime it was taken on:
   * Kong may have replaced the instance and its config since, or a changed `redis` record the
   * runtime), nothing before it may keep it from going back. Then Kong's own 502/504 (source
   * "error": no attempt got a response) marks the replica down at once; a replica's own 5xx
   * (source "service") is left to passive health. Kong/kong 3.9.3 kong/pdk/response.lua
   * `get_source`, kong/init.lua `Kong.handle_error`. Throws LeaseNotOpen when the lease is not
   * open here (given back already, reclaimed by age).
   */
  static async logPhase(
    record: DecisionRecord,
    status: number | undefined,
    source: () => Promise<unknown>,
  ): Promise<void> {
    const lease = LeaseHandle.find(record.lease);
    if (!lease) throw new LeaseNotOpen(record.lease);
    await RouterService.release(lease, status);
    if ((status === 502 || status === 504) && (await source()) === 'error')
      await RouterService.proxyFailed(lease.rt.current(), record.replica, status);
  }

  /**
   * Kong could not proxy a routed request to `url` (its own 502 or 504: connection refused or
   * reset, a timeout, every retry spent): down for routing now, as a failed poll marks it, so
   * the next requests go elsewhere; the next poll that reaches it brings it back.
   */
  static async proxyFailed(rt: FleetRuntime, url: string, status: number): Promise<void> {
    const at = rt.clock.now();
    await rt.store.applySnapshot(url, {
      at,
      startedAt: at,
      ok: false,
      error: `Kong could not proxy to it (${status})`,
    });
  }

  /**
   * The routing rule: a path the gateway serves, the model it names, the replicas' fresh views;
   * then placement picks the replica and admission takes the lease and ensures the adapter.
   */
  private async decide(rt: FleetRuntime, req: RouteRequest, wait: RoomWait): Promise<RouteOutcome> {
    const cls = await this.checkPath(req);
    await this.ready;
    if (cls === 'models' || cls === 'model') return this.answerModels(rt, req.path, cls);
    const parsed = parseBody(req.body, cls, this.config.max_body_bytes);
    const tokens = cls === 'inference' ? estimateTokens(parsed.json) : undefined;
    const resolved: Resolved = this.catalog.resolve(parsed.model);
    const adapter = resolved.kind === 'base' ? undefined : resolved.adapter;
    const ctx: SchedulingContext = { now: rt.clock.now(), policy: this.policy, random: rt.random };
    // Decayed frequencies are read only by `eviction: value`.
    if (adapter && this.config.eviction === 'value') rt.adapterStats.observe(adapter.name, ctx.now);
    const views = await this.refreshIfStale(
      rt,
      await rt.store.views(this.urls, adapter, false),
      adapter,
      false,
    );
    if (resolved.kind !== 'base' && resolved.discovered && !views.some((v) => v.adapter)) {
      throw errors.modelNotFound(resolved.adapter.name);
    }
    // No load will ever bring it: a retry cannot succeed, unlike no_replica's.
    if (
      resolved.kind === 'on-demand' &&
      !this.loads &&
      !views.some((v) => v.adapter && v.adapter.state !== 'unloading')
    )
      throw errors.adapterLoadingDisabled(resolved.adapter.name);
    if (tokens) this.checkContext(rt, tokens, resolved, views);
    if (tokens && this.config.saturation_mode === 'predicted') this.predictFor(rt, ctx, tokens, resolved);
    // Only the prefix scorer reads the prompt.
    const prompt = this.config.scorer_weights.prefix > 0 ? promptText(parsed.json, PROMPT_CHARS) : undefined;
    // A request spends the cold-load budget once, however often escalation sends it to ensure.
    let spent = false;
    const spend = async () => {
      if (spent || resolved.kind !== 'on-demand') return;
      await spendColdLoad(rt, this.coldBudget, resolved.adapter.name, req.consumer);
      spent = true;
    };
    // The longest prompt of a batch: vLLM checks each on its own (src/work/estimate.ts).
    const contextTokens = tokens ? tokens.longestPromptTokens + (tokens.maxTokens ?? 1) : undefined;
    if (contextTokens !== undefined) ctx.contextOf = (url) => rt.poller.maxModelLen.get(url);
    return this.placement.place(
      rt,
      { resolved, adapter, prompt, contextTokens, ctx, views, wait },
      (decision, queueMs) =>
        this.admit(rt, decision, resolved, parsed.json, ctx.victimCost, queueMs, spend, tokens),
    );
  }

  /** `max_loaded_adapters` > 0: the router loads on-demand adapters (0: never loads nor unloads). */
  private get loads(): boolean {
    return this.config.max_loaded_adapters > 0;
  }

  /** `/v1/models` and `/v1/models/{id}` (the SDK's `models.retrieve`): the fleet's list, or one card of it. */
  private async answerModels(rt: FleetRuntime, path: string, cls: 'models' | 'model'): Promise<RouteOutcome> {
    const list = modelList(
      this.config.base_model,
      this.catalog,
      await rt.store.dump(),
      this.urls,
      this.loads,
    );
    let body: unknown = list;
    if (cls === 'model') {
      const id = modelIdOf(path);
      body = list.data.find((m) => m.id === id);
      if (body === undefined) throw errors.modelNotFound(id);
    }
    return { kind: 'respond', status: 200, body, headers: { 'Content-Type': 'application/json' } };
  }

  /**
   * Refuses up front a request longer than the context of every replica that could serve its
   * model (vLLM would answer 400 on each): only when each of those has reported its
   * `max_model_len`. One that reports none (llama.cpp) may have room: it gets the request and
   * answers for itself. Health is not asked: a replica down now may come back with room.
   */
  private checkContext(rt: FleetRuntime, t: TokenEstimate, resolved: Resolved, views: ReplicaView[]): void {
    // Without max_tokens vLLM refuses a prompt that fills the context (serving_engine.py
    // `_validate_input`): it needs one token of room, as the eligibility filter counts.
    const need = t.longestPromptTokens + (t.maxTokens ?? 1);
    const lens = rt.poller.maxModelLen;
    let max = 0;
    let serving = 0;
    for (const v of views) {
      const holder = v.adapter !== undefined && v.adapter.state !== 'unloading';
      if (!canServe(resolved.kind, { holder, backend: v.backend }, this.config.max_loaded_adapters)) continue;
      const len = lens.get(v.url);
      if (len === undefined || need <= len) return;
      serving++;
      if (len > max) max = len;
    }
    if (serving > 0) throw errors.contextLengthExceeded(max, t.longestPromptTokens, t.maxTokens);
  }

  /** `saturation_mode: predicted`: each candidate's predicted TTFT for this request (src/work/predict.ts). */
  private predictFor(rt: FleetRuntime, ctx: SchedulingContext, t: TokenEstimate, resolved: Resolved): void {
    const adapter = resolved.kind === 'on-demand' ? resolved.adapter.name : undefined;
    const base = {
      promptTokens: t.promptTokens,
      maxTokens: t.maxTokens ?? DEFAULT_MAX_TOKENS,
      adapter,
      maxLoadedAdapters: this.config.max_loaded_adapters,
      queueTimeoutMs: this.config.queue_timeout_ms,
    };
    ctx.predict = (c) => {
      const p = predictTtft(
        c,
        base,
        ctx.now,
        rt.work,
        rt.loadTimes,
        // Residents are read once a cold decision weighs victims: then it is known whether a load can start now.
        c.holder || c.residents === undefined ? undefined : loadCost(c, ctx) !== undefined,
      );
      c.ttftMs = p.totalMs;
      c.loadMs = p.loadMs;
      c.fixedMs = p.fixedMs;
      c.ownMs = p.ownMs;
    };
  }

  /** Refuses the replicas' management paths, and methods a path does not take. */
  private async checkPath(req: RouteRequest): Promise<PathClass> {
    const cls = classifyPath(req.path);
    if (cls === 'admin') {
      throw errors.forbidden('This path manages the replicas and is not available through the gateway.');
    }
    const allow = allowedMethods(cls);
    const bodyless = req.body === undefined || req.body === null || req.body.length === 0;
    if (allow && req.method && (cls === 'models' || cls === 'model' || bodyless)) {
      const method = (await req.method()).toUpperCase();
      if (!allow.includes(method)) throw errors.methodNotAllowed(method, allow);
    }
    return cls;
  }

  /** Takes the lease, makes sure the adapter is there, and shapes the proxied request. */
  private async admit(
    rt: FleetRuntime,
    decision: Decision,
    resolved: Resolved,
    json: Record<string, unknown> | null,
    victimCost: ((v: ResidentAdapter) => number) | undefined,
    queueTimeoutMs: number,
    spend: () => Promise<void>,
    tokens: TokenEstimate | undefined,
  ): Promise<RouteOutcome> {
    const replica = decision.replica;
    const adapterName = resolved.kind === 'base' ? null : resolved.adapter.name;
    // Taken on the decision's runtime, and given back there whatever happens meanwhile.
    const { lease, state: held } = await LeaseHandle.take(rt, replica.url, adapterName);
    const leaseId = lease.id;
    // From here on, any failure gives the lease back before it is answered.
    try {
      // The state under the lease, not the decision's: an unload may have begun since the views.
      const state = replica.backend === 'vllm' ? held : replica.adapter?.state;
      const load = resolved.kind === 'on-demand' && state !== 'loaded' && state !== 'static';
      // Admitted to the work model before the load: requests routed meanwhile queue behind it.
      if (tokens && rt.predictsWork)
        rt.work.admit({
          id: leaseId,
          url: replica.url,
          promptTokens: tokens.promptTokens,
          maxTokens: tokens.maxTokens ?? DEFAULT_MAX_TOKENS,
          at: rt.clock.now(),
          startMs: load && adapterName !== null ? rt.loadTimes.load(adapterName) : 0,
        });
      if (load) {
        const adapter = resolved.adapter;
        const policy = { ...this.adapterPolicy, queueTimeoutMs };
        await rt.manager.ensure(replica.url, adapter, policy, victimCost, spend);
      }
      rt.metrics.decisions.inc({ stage: decision.stage });
      rt.metrics.recent.record('requests', rt.clock.now());
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
      // Not RouterService.release: that also wakes the requests waiting for room when the
      // adapter went idle, which changes how escalated requests retry (measured in every
      // routing figure where admissions fail); a change of behaviour for its own issue.
      await lease.release();
      throw err;
    }
  }

  /**
   * A replica with no fresh snapshot and no recent poll attempt (no poller in this process
   * yet, or it just started): poll it now rather than route blind. Single flight per replica
   * in the poller; bounded by `refresh_timeout_ms`.
   */
  private async refreshIfStale(
    rt: FleetRuntime,
    views: ReplicaView[],
    adapter: AdapterRef | undefined,
    withResidents: boolean,
  ): Promise<ReplicaView[]> {
    const now = rt.clock.now();
    const stale = (t: number | null) => t === null || now - t > this.config.stale_after_ms;
    const need = views.filter((v) => stale(v.snapshotAt) && stale(v.checkedAt));
    if (need.length === 0) return views;
    const specs = need.map((v) => this.specs.find((s) => s.url === v.url)!);
    await Promise.race([
      Promise.all(specs.map((s) => rt.poller.refresh(s))),
      sleep(rt.clock, this.config.refresh_timeout_ms),
    ]);
    return rt.store.views(this.urls, adapter, withResidents);
  }
}

/** Host and port of a replica URL, as `kong.service.set_target` takes them (IPv6 unbracketed), and its scheme. */
function targetOf(url: string): { host: string; port: number; https: boolean } {
  const u = new URL(url);
  const https = u.protocol === 'https:';
  return { host: u.hostname.replace(/^\[|\]$/g, ''), port: Number(u.port || (https ? 443 : 80)), https };
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
