import { AdapterCatalog, type Resolved } from '../adapters/catalog';
import { EVICTION_POLICIES } from '../adapters/eviction';
import type { AdapterPolicy } from '../adapters/manager';
import { sleep } from '../clock';
import type { RouterConfig } from '../config/router-schema';
import { errors, RouterError } from '../errors';
import type { AdapterRef, ReplicaSpec, ReplicaView, ResidentAdapter } from '../fleet/types';
import { samePath } from '../fleet/replica-record';
import { LeaseHandle } from '../lease';
import type { FleetRuntime } from '../runtime';
import { claimReplicas } from '../runtime-registry';
import { isHolder, pipelineFor, SchedulingPipeline } from '../scheduler/pipeline';
import { PrefixIndex } from '../scheduler/prefix-index';
import type { Decision, SchedulingContext, SchedulingPolicy, Stage } from '../scheduler/types';
import { estimateTokens, type TokenEstimate } from '../work/estimate';
import { DEFAULT_MAX_TOKENS } from '../work/work-model';
import { spendColdLoad, type ColdLoadBudget } from './cold-budget';
import { answerModels, checkContext, checkPath } from './direct-answers';
import { giveBack, LastReplicas, takeLease, type GuessedLease } from './guessed-lease';
import { releaseLease } from './log-phase';
import { Placement, SeenDown } from './placement';
import { withPolledHealth } from './polled-health';
import { predictFor } from './prediction';
import { llamaBody, targetOf } from './proxied-request';
import { parseBody, promptText, type ParsedBody } from './request';
import { RoomWait } from './room-wait';
import { HeldClasses, SloClasses, type SloHints } from './slo-class';

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
  /**
   * The request's class hints (its objective headers, its consumer): asked only with
   * `slo_classes` configured and for a path the router routes.
   */
  slo?: () => Promise<SloHints>;
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
      /** `saturation_mode: predicted`: the TTFT predicted on the chosen replica, ms. */
      predictedTtftMs?: number;
    };

/** The prefix index's reach: its 32 blocks of 256 characters (src/scheduler/prefix-index.ts). */
const PROMPT_CHARS = 8192;
const INTERNAL_LOG_EVERY_MS = 10_000;
/**
 * Fresh leases one admission may take after waits longer than half `lease_max_age_ms` (each wait
 * an unload met and the adapter loaded again): past them, 503 and the client retries.
 */
const RETAKES = 4;

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
  /** `slo_classes`: each request's objective and priority. */
  readonly classes: SloClasses;
  /** Requests held in the gateway per priority (this configuration, this process). */
  private readonly held = new HeldClasses();
  /** Which replica served each prompt prefix last: the prefix scorer's, shared by both pipelines and the prediction. */
  private readonly prefixIndex = new PrefixIndex();
  /** Per adapter: the replica its last request was admitted on (the next one's guessed lease). */
  private readonly lastReplica = new LastReplicas();
  /** Per error code: when its detail was last logged, and how many were not since. */
  private readonly internalLogged = new Map<string, { at: number; suppressed: number }>();

  constructor(
    readonly config: RouterConfig,
    /** The runtime this configuration began on (`current()` follows `redis` record changes). */
    readonly runtime: FleetRuntime,
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
    this.classes = new SloClasses(config);
    this.placement = new Placement({
      pipeline: new SchedulingPipeline(pipelineFor(config), { prefixIndex: this.prefixIndex }),
      // Once a request waits for room anywhere (`escalate`, after its wait on the chosen replica).
      roomPipeline: new SchedulingPipeline(pipelineFor({ ...config, room_wait: 'anywhere' }), {
        prefixIndex: this.prefixIndex,
      }),
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
    // The latest configuration registered sets prefetching for the runtime (as replicas' limits).
    rt.prefetcher.configure({
      enabled: config.prefetch,
      halfLifeMs: config.prefetch_half_life_ms,
      intervalMs: config.prefetch_interval_ms,
      hysteresis: config.prefetch_hysteresis,
      evictFactor: config.prefetch_evict_factor,
      loadsPerMinute: config.prefetch_loads_per_minute,
      coldLoadsPerMinute: config.cold_loads_per_minute,
      staleAfterMs: config.stale_after_ms,
    });
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
   * Gives the request's in-flight lease back and records passive health (the log phase without
   * Kong's own 502/504: log-phase.ts `logPhase`). Throws LeaseNotOpen when no lease with this id is open in
   * this process (given back already, reclaimed by age).
   */
  async finish(leaseId: string, status: number | undefined): Promise<void> {
    await releaseLease(LeaseHandle.open(leaseId), status);
  }

  /**
   * The routing rule: a path the gateway serves, the model it names, the replicas' fresh views;
   * then placement picks the replica and admission takes the lease and ensures the adapter.
   */
  private async decide(rt: FleetRuntime, req: RouteRequest, wait: RoomWait): Promise<RouteOutcome> {
    const cls = await checkPath(req);
    await this.ready;
    if (cls === 'models' || cls === 'model')
      return answerModels(rt, req.path, cls, {
        baseModel: this.config.base_model,
        catalog: this.catalog,
        urls: this.urls,
        loads: this.loads,
      });
    const parsed = parseBody(req.body, cls, this.config.max_body_bytes);
    // With classes, the request's own objective and priority: its wait still counts from arrival.
    if (this.classes.enabled)
      wait = new RoomWait(
        this.config,
        wait.started,
        this.classes.resolve((await req.slo?.()) ?? {}),
        this.held,
      );
    const tokens = cls === 'inference' ? estimateTokens(parsed.json) : undefined;
    const resolved: Resolved = this.catalog.resolve(parsed.model);
    const adapter = resolved.kind === 'base' ? undefined : resolved.adapter;
    const ctx: SchedulingContext = { now: rt.clock.now(), policy: this.policy, random: rt.random };
    // Decayed frequencies are read only by `eviction: value`.
    if (adapter && this.config.eviction === 'value') rt.adapterStats.observe(adapter.name, ctx.now);
    // Demand for placement ahead of it (`prefetch`): loads only ever bring on-demand adapters.
    if (resolved.kind === 'on-demand' && this.config.prefetch)
      rt.prefetcher.observe(resolved.adapter, this.urls, ctx.now);
    // Where this adapter's last request went: the lease is taken there with the views (one
    // round trip to a shared store) and kept if the decision goes there again.
    const leaseAdapter = resolved.kind === 'base' ? null : resolved.adapter.name;
    // In process there is no round trip to save: no guess.
    const last = rt.store.mode?.() === 'redis' ? this.lastReplica.get(leaseAdapter) : undefined;
    const guess: GuessedLease = {};
    let first: ReplicaView[];
    if (last !== undefined) {
      const t = await LeaseHandle.takeWithViews(rt, last, leaseAdapter, this.urls, adapter);
      guess.held = { lease: t.lease, state: t.state };
      first = t.views;
    } else first = await rt.store.views(this.urls, adapter, false);
    try {
      return await this.decideOn(rt, req, wait, { parsed, tokens, resolved, adapter, ctx, guess, first });
    } finally {
      giveBack(rt, guess);
      await guess.givingBack;
    }
  }

  /** The decision on the first views, with the guessed lease (if any) in `guess`. */
  private async decideOn(
    rt: FleetRuntime,
    req: RouteRequest,
    wait: RoomWait,
    d: {
      parsed: ParsedBody;
      tokens: TokenEstimate | undefined;
      resolved: Resolved;
      adapter: AdapterRef | undefined;
      ctx: SchedulingContext;
      guess: GuessedLease;
      first: ReplicaView[];
    },
  ): Promise<RouteOutcome> {
    const { parsed, tokens, resolved, adapter, ctx, guess } = d;
    const views = await this.refreshIfStale(rt, d.first, adapter, false);
    if (resolved.kind !== 'base' && resolved.discovered && !views.some((v) => v.adapter)) {
      throw errors.modelNotFound(resolved.adapter.name);
    }
    // No load will ever bring it: a retry cannot succeed, unlike no_replica's.
    if (resolved.kind === 'on-demand' && !this.loads && !views.some(isHolder))
      throw errors.adapterLoadingDisabled(resolved.adapter.name);
    if (tokens) checkContext(rt, tokens, resolved, views, this.config.max_loaded_adapters);
    // Only the prefix index reads the prompt: the scorer, and the prediction's prefix credit.
    const prompt = this.config.scorer_weights.prefix > 0 ? promptText(parsed.json, PROMPT_CHARS) : undefined;
    if (tokens && this.config.saturation_mode === 'predicted')
      predictFor(rt, ctx, tokens, resolved, prompt, adapter?.name, this.prefixIndex, this.config);
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
    // The guessed lease goes back as soon as a decision goes elsewhere (before any wait for room).
    const decided = (url: string) => {
      if (guess.held && guess.held.lease.lease.url !== url) giveBack(rt, guess);
    };
    try {
      return await this.placement.place(
        rt,
        { resolved, adapter, prompt, contextTokens, ctx, views, wait, decided },
        (decision, queueMs, recheckPlacement) =>
          this.admit(
            rt,
            decision,
            resolved,
            parsed.json,
            ctx.victimCost,
            { queueMs, until: wait.accessDeadline, recheckPlacement },
            spend,
            tokens,
            guess,
          ),
      );
    } finally {
      wait.leave();
    }
  }

  /**
   * Whether `lease` is old enough that a store's expiry sweep may have reclaimed it: past half of
   * `lease_max_age_ms` (this node's clock against Redis's: half leaves room for any skew the
   * store's own age allows).
   */
  private mayBeReclaimed(rt: FleetRuntime, lease: LeaseHandle): boolean {
    return rt.clock.now() - lease.lease.at >= this.config.lease_max_age_ms / 2;
  }

  /** `max_loaded_adapters` > 0: the router loads on-demand adapters (0: never loads nor unloads). */
  private get loads(): boolean {
    return this.config.max_loaded_adapters > 0;
  }

  /** Takes the lease, makes sure the adapter is there, and shapes the proxied request. */
  private async admit(
    rt: FleetRuntime,
    decision: Decision,
    resolved: Resolved,
    json: Record<string, unknown> | null,
    victimCost: ((v: ResidentAdapter) => number) | undefined,
    /** How long the load may wait for room, when the access phase must be over, and the placement's check after a wait. */
    wait: { queueMs: number; until: number; recheckPlacement?: () => Promise<string> },
    spend: () => Promise<void>,
    tokens: TokenEstimate | undefined,
    guess: GuessedLease,
  ): Promise<RouteOutcome> {
    const replica = decision.replica;
    const adapterName = resolved.kind === 'base' ? null : resolved.adapter.name;
    // Taken on the decision's runtime, and given back there whatever happens meanwhile.
    let { lease, state: held } = await takeLease(rt, replica.url, adapterName, guess);
    // From here on, any failure gives the lease back before it is answered.
    try {
      // Admitted to the work model before the load: requests routed meanwhile queue behind it.
      const admitWork = (id: string, load: boolean) => {
        if (tokens && rt.predictsWork)
          rt.work.admit({
            id,
            url: replica.url,
            promptTokens: tokens.promptTokens,
            maxTokens: tokens.maxTokens ?? DEFAULT_MAX_TOKENS,
            at: rt.clock.now(),
            startMs: load && adapterName !== null ? rt.loadTimes.load(adapterName) : 0,
            cachedTokens: replica.cachedTokens,
          });
      };
      for (let round = 0; ; round++) {
        // The state under the lease, not the decision's: an unload may have begun since the views.
        const state = replica.backend === 'vllm' ? held : replica.adapter?.state;
        const load = resolved.kind === 'on-demand' && state !== 'loaded' && state !== 'static';
        if (round === 0) admitWork(lease.id, load);
        if (load) {
          const adapter = resolved.adapter;
          const policy = {
            ...this.adapterPolicy,
            queueTimeoutMs: wait.queueMs,
            deadline: wait.until,
            ...(wait.recheckPlacement ? { recheckPlacement: wait.recheckPlacement } : {}),
          };
          await rt.manager.ensure(replica.url, adapter, policy, victimCost, spend);
          // The load (or its wait for room) took time: a replica seen down meanwhile gets no request.
          if (replica.health !== 'down') {
            const [now] = await withPolledHealth(rt, await rt.store.views([replica.url], undefined, false));
            if (now?.health === 'down') throw new SeenDown(replica.url);
          }
        }
        if (!this.mayBeReclaimed(rt, lease)) break;
        if (round >= RETAKES)
          throw errors.noRoom(
            adapterName ?? 'base',
            replica.url,
            1,
            'it was unloaded each time it was about to be used',
          );
        // Waited so long that an expiry sweep may have reclaimed the lease (a load slower than
        // lease_max_age_ms): a fresh one, taken before the old goes back so one always holds the
        // adapter, with the state under it; an unload begun meanwhile is waited out and the
        // adapter loaded again, as for any request (seed 102923).
        const fresh = await LeaseHandle.take(rt, replica.url, adapterName);
        const old = lease;
        ({ lease, state: held } = fresh);
        await old.release();
        admitWork(lease.id, false);
      }
      if (rt.store.mode) this.lastReplica.remember(adapterName, replica.url);
      rt.metrics.decisions.inc({ stage: decision.stage });
      rt.metrics.recent.record('requests', rt.clock.now());
      return {
        kind: 'proxy',
        url: replica.url,
        ...this.targets.get(replica.url)!,
        leaseId: lease.id,
        stage: decision.stage,
        adapter: adapterName,
        body:
          replica.backend === 'llamacpp' && json
            ? llamaBody(json, replica.adapter?.llamaId, replica.llamaIds ?? [])
            : undefined,
        ...(this.config.saturation_mode === 'predicted' ? { predictedTtftMs: replica.ttftMs } : {}),
      };
    } catch (err) {
      // Not releaseLease (log-phase.ts): that also wakes the requests waiting for room when the
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
