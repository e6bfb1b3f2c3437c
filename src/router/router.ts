import { AdapterCatalog, type Resolved } from '../adapters/catalog';
import { EVICTION_POLICIES } from '../adapters/eviction';
import { RuntimeReplaced } from '../adapters/room';
import type { AdapterPolicy } from '../adapters/manager';
import type { RouterConfig } from '../config/router-schema';
import { errors, RouterError } from '../errors';
import type { ConfigClaim } from '../fleet/node-claim';
import type { ReplicaSpec, ReplicaView } from '../fleet/types';
import { LeaseHandle } from '../lease';
import type { FleetRuntime } from '../runtime';
import { isHolder, pipelineFor, SchedulingPipeline } from '../scheduler/pipeline';
import { PrefixIndex } from '../scheduler/prefix-index';
import type { SchedulingContext, SchedulingPolicy } from '../scheduler/types';
import { estimateTokens } from '../work/estimate';
import { admit, type AdmissionSetup } from './admission';
import { spendColdLoad, type ColdLoadBudget } from './cold-budget';
import { answerModels, checkContext, checkPath, pathClassNow } from './direct-answers';
import { giveBack, LastReplicas, type GuessedLease } from './guessed-lease';
import { releaseLease } from './log-phase';
import type { RouteOutcome, RouteRequest } from './outcome';
import { Placement } from './placement';
import { predictFor } from './prediction';
import { targetOf } from './proxied-request';
import { RefusalLog } from './refusal-log';
import { adapterPolicyOf, coldBudgetOf, registerConfiguration, schedulingPolicy } from './registration';
import { parseBody, promptText } from './request';
import { RoomWait } from './room-wait';
import { heldOn, type HeldClasses, SloClasses } from './slo-class';
import { needsRefresh, refreshIfStale } from './stale-refresh';

export type { RouteOutcome, RouteRequest } from './outcome';

/** The prefix index's reach: its 32 blocks of 256 characters (src/scheduler/prefix-index.ts). */
const PROMPT_CHARS = 8192;

/**
 * The request path for one plugin configuration: classify, schedule, ensure the adapter,
 * pick the target. Everything shared (fleet state, loads, polling) lives in the runtime;
 * this object only holds what its config implies, so Kong may create and drop it freely.
 * Its steps each have a file: the configuration's registration (registration.ts), stale views
 * refreshed (stale-refresh.ts), placement (placement.ts), admission (admission.ts), the refusal
 * log (refusal-log.ts).
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
  /**
   * Its registration in the node's claim: once another configuration of its plugin registered
   * (`superseded`), each request marks it used, which keeps its replicas claimed.
   */
  private readonly claim: ConfigClaim;
  /** `ready` has resolved: a request then awaits nothing for it (a microtask hop less, every request). */
  private registered = false;
  private readonly coldBudget: ColdLoadBudget;
  /** `slo_classes`: each request's objective and priority. */
  readonly classes: SloClasses;
  /** Requests held in the gateway per priority (this configuration on this runtime: every worker's instance of it). */
  private readonly held: HeldClasses;
  /** Which replica served each prompt prefix last: the prefix scorer's, shared by both pipelines and the prediction. */
  private readonly prefixIndex = new PrefixIndex();
  /** Per adapter: the replica its last request was admitted on (the next one's guessed lease). */
  private readonly lastReplica = new LastReplicas();
  /** Where refusals happened, for operators, at most a line per code every 10 s. */
  private readonly refusals = new RefusalLog();
  /** What admission reads of this configuration. */
  private readonly admission: AdmissionSetup;
  /** What a refresh of stale views reads of it. */
  private readonly fleet: Parameters<typeof refreshIfStale>[0];

  constructor(
    readonly config: RouterConfig,
    /** The runtime this configuration began on (`current()` follows `redis` record changes). */
    readonly runtime: FleetRuntime,
    /** Kong's `__plugin_id`: a later configuration of the same plugin supersedes this one (node-claim.ts). */
    pluginId?: string,
    /** Kong's `__seq__`: a registration of an older configuration supersedes no newer one. */
    seq?: number,
  ) {
    const rt = runtime;
    this.catalog = new AdapterCatalog({
      baseModel: config.base_model,
      adapters: config.adapters,
      pathTemplate: config.adapter_path_template,
      namePattern: config.adapter_name_pattern,
    });
    this.specs = config.replicas.map((r) => ({ url: r.url, backend: r.backend, priority: r.priority }));
    this.held = heldOn(runtime, config);
    this.urls = this.specs.map((s) => s.url);
    this.targets = new Map(this.urls.map((url) => [url, targetOf(url)]));
    this.policy = schedulingPolicy(config);
    this.adapterPolicy = adapterPolicyOf(config, this.catalog);
    this.coldBudget = coldBudgetOf(config);
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
    this.fleet = { config, specs: this.specs, urls: this.urls };
    this.admission = {
      config,
      adapterPolicy: this.adapterPolicy,
      targets: this.targets,
      lastReplica: this.lastReplica,
    };
    const registration = registerConfiguration(rt, config, {
      catalog: this.catalog,
      specs: this.specs,
      policy: this.policy,
      adapterPolicy: this.adapterPolicy,
      key: pluginId,
      seq,
    });
    this.claim = registration.claim;
    this.ready = registration.ready.then(() => {
      this.registered = true;
    });
  }

  /**
   * One decision, on one runtime from start to end: the one current when the request came (a
   * `redis` record change meanwhile sends only later requests to the new one). Its lease is taken,
   * and given back, there. Except a decision that would wait for room on a runtime replaced by
   * one on other state (RuntimeReplaced): it gives back what it took there and is decided again
   * on the runtime current now, its wait still counted from arrival. Each such round moves to a
   * newer runtime, so they end.
   */
  async route(req: RouteRequest): Promise<RouteOutcome> {
    let rt = this.runtime.current();
    // A field check while this configuration is its plugin's latest: no Map work per request.
    // Its runtime retired since because every plugin left its record: kept (and lapsed) there,
    // taken back on the current one it claimed its replicas in that one's state (review-move).
    if (this.claim.superseded && !this.runtime.leftSince()) rt.supersededUsed(this.claim);
    // Held requests are counted with or without classes: the end of a hold reads the backlog.
    const wait = new RoomWait(this.config, rt.clock.now(), undefined, this.held);
    // A request spends the cold-load budget once, on whichever runtime: a grant a replaced
    // runtime made is counted in its successor's state already (FleetRuntime.carrySpends).
    const budget = { spent: false };
    try {
      for (;;) {
        const on = rt;
        try {
          // Counted as under way on its runtime (a replaced one drains on it), with no closure
          // nor async step of its own.
          on.decisionBegan();
          try {
            return await this.decide(on, req, wait, budget);
          } finally {
            on.decisionEnded();
          }
        } catch (err) {
          if (!(err instanceof RuntimeReplaced) || on.current() === on) throw err;
          rt = on.current();
        }
      }
    } catch (err) {
      const e = err instanceof RouterError ? err : errors.internal();
      if (!(err instanceof RouterError)) rt.log.error(`route failed: ${(err as Error).stack ?? String(err)}`);
      else if (e.internal !== undefined) this.refusals.log(rt, e.code, e.internal);
      rt.metrics.errors.inc({ code: e.code });
      if (e.retryAfterS !== undefined) {
        rt.metrics.refusals.inc();
        rt.metrics.recent.record('refusals', rt.clock.now());
      }
      return { kind: 'respond', status: e.status, body: e.body(), headers: e.headers() };
    }
  }

  /**
   * Gives the request's in-flight lease back and records passive health (the log phase without
   * Kong's own 502/504: log-phase.ts `logPhase`). Throws LeaseNotOpen when no lease with this id is open in
   * this process (given back already, reclaimed by age). `served` false: the request never reached
   * the replica (log-phase.ts `releaseLease`).
   */
  async finish(leaseId: string, status: number | undefined, served = true): Promise<void> {
    const released = releaseLease(LeaseHandle.open(leaseId), status, served);
    if (released) await released;
  }

  /**
   * The routing rule: a path the gateway serves, the model it names, the replicas' fresh views;
   * then placement picks the replica and admission takes the lease and ensures the adapter.
   */
  private async decide(
    rt: FleetRuntime,
    req: RouteRequest,
    wait: RoomWait,
    budget: { spent: boolean },
  ): Promise<RouteOutcome> {
    // Awaited only where something is pending: the method (a PDK call), the registration.
    const cls = pathClassNow(req) ?? (await checkPath(req));
    if (!this.registered) await this.ready;
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
    // The manager's backoff: the `load-backoff` filter routes around loads held off after failing.
    const ctx: SchedulingContext = {
      now: rt.clock.now(),
      policy: this.policy,
      random: rt.random,
      loadBackoff: rt.manager.backoff,
    };
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
    // Before the views are read: this process's leases answered after may be missing from them.
    let viewsMark = LeaseHandle.viewsMark();
    if (last !== undefined) {
      const t = await LeaseHandle.takeWithViews(rt, last, leaseAdapter, this.urls, adapter);
      guess.held = { lease: t.lease, state: t.state };
      first = t.views;
    } else
      first =
        rt.store.viewsNow?.(this.urls, adapter, false) ?? (await rt.store.views(this.urls, adapter, false));
    // One async step for the decision on the first views (no second function, no argument object).
    try {
      const refreshMark = LeaseHandle.viewsMark();
      const views = needsRefresh(this.config, rt.clock.now(), first)
        ? await refreshIfStale(this.fleet, rt, first, adapter, false)
        : first;
      // Read again (stale): they show the guessed lease (in-flight-here.ts).
      if (views !== first) viewsMark = refreshMark;
      if (resolved.kind !== 'base' && resolved.discovered && !views.some((v) => v.adapter)) {
        throw errors.modelNotFound(resolved.adapter.name);
      }
      // No load will ever bring it: a retry cannot succeed, unlike no_replica's.
      if (resolved.kind === 'on-demand' && !this.loads && !views.some(isHolder))
        throw errors.adapterLoadingDisabled(resolved.adapter.name);
      if (tokens) checkContext(rt, tokens, resolved, views, this.config.max_loaded_adapters);
      // Only the prefix index reads the prompt: the scorer, and the prediction's prefix credit.
      const prompt =
        this.config.scorer_weights.prefix > 0 ? promptText(parsed.json, PROMPT_CHARS) : undefined;
      if (tokens && this.config.saturation_mode === 'predicted')
        predictFor(
          rt,
          ctx,
          tokens,
          resolved,
          prompt,
          adapter?.name,
          this.prefixIndex,
          this.config,
          // With classes: what a cold load would stall of higher classes' requests (room-wait.ts holds for it).
          this.classes.enabled ? wait.priority : undefined,
        );
      // A request spends the cold-load budget once, however often escalation sends it to ensure.
      const spend = async () => {
        if (budget.spent || resolved.kind !== 'on-demand') return;
        await spendColdLoad(rt, this.coldBudget, resolved.adapter.name, req.consumer);
        budget.spent = true;
      };
      // The longest prompt of a batch: vLLM checks each on its own (src/work/estimate.ts).
      const contextTokens = tokens ? tokens.longestPromptTokens + (tokens.maxTokens ?? 1) : undefined;
      // The runtime's function, not a closure here (runtime.ts `contextOf` says why).
      if (contextTokens !== undefined) ctx.contextOf = rt.contextOf;
      // The guessed lease goes back as soon as a decision goes elsewhere (before any wait for room),
      // or the request is held in the gateway: in flight nowhere, it would count against a class's
      // `max_in_flight` there (a fresh lease is taken when it goes). Not a closure on `wait`: kept
      // there it held the decision's scope through a young-generation collection
      // (test/kong/young-promotion.test.ts: 3,888 bytes a request).
      const decided = (url: string | null) => {
        if (guess.held && (url === null || guess.held.lease.lease.url !== url)) giveBack(rt, guess);
      };
      try {
        return await this.placement.place(
          rt,
          {
            resolved,
            adapter,
            prompt,
            contextTokens,
            ctx,
            views,
            wait,
            decided,
            ownLease: () => guess.held?.lease,
            viewsMark,
          },
          (decision, queueMs, recheckPlacement, placeHere) =>
            admit(
              this.admission,
              rt,
              decision,
              resolved,
              parsed,
              ctx.victimCost,
              { queueMs, until: wait.accessDeadline, recheckPlacement, placeHere, priority: wait.priority },
              spend,
              tokens,
              guess,
            ),
        );
      } finally {
        wait.leave();
      }
    } finally {
      // Not waited for (guessed-lease.ts `giveBack`): the decision is proxied at once.
      giveBack(rt, guess);
    }
  }

  /** `max_loaded_adapters` > 0: the router loads on-demand adapters (0: never loads nor unloads). */
  private get loads(): boolean {
    return this.config.max_loaded_adapters > 0;
  }
}
