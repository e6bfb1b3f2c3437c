import type { LoadOutcome, ReplicaApi, Scrape, UnloadOutcome } from '../../src/backends/replica-api';
import type { Clock } from '../../src/clock';
import type { ReplicaSpec } from '../../src/fleet/types';
import {
  defaultEngineOptions,
  ReplicaEngine,
  type EngineOptions,
  type RequestRecord,
} from '../../sim/engine/engine';
import { contextLengthError } from '../../sim/engine/context';
import { loadCostFor } from '../../sim/engine/load-cost';
import type { UnloadMode } from '../../sim/http/replica';

/**
 * How replicas get adapters. `managed`: only through the runtime load API (lora-router).
 * `resolver`: vLLM's filesystem resolver: any adapter is served; the first request for a name
 * on a replica loads it before it queues (under the name's lock, blocking engine steps), and a
 * later miss in the `max_cpu_loras` LRU reloads it inside the engine loop (the baselines, which
 * route blind to residency).
 * `oracle`: every adapter resident everywhere, loads free (the TTFT bound).
 * `pooled`: the replicas pooled into one engine with their total capacity (every replica's
 * running slots and KV cache, their prefill and decode throughput) and every adapter resident,
 * loads free: no placement, no imbalance (the pooled bound, bench/des/bounds.ts).
 */
export type AdapterMode = 'managed' | 'resolver' | 'oracle' | 'pooled';

export interface DesFleetOptions {
  replicas: number;
  /** Adapter slots per replica: vLLM max_loras, lora-router max_loaded_adapters; max_cpu_loras is one more. */
  slots: number;
  /** Load time of the benchmark's rank-16 adapters; absent: the engine's load model (local NVMe). */
  loadMs?: number;
  mode: AdapterMode;
  /** What vLLM's unload frees (see ReplicaOptions.unload); default the released behaviour. */
  unload?: UnloadMode;
  engine?: Partial<EngineOptions>;
  /**
   * The replicas export the computed-token families of newer vLLM (`vllm:request_prefill_kv_computed_tokens`,
   * `vllm:prompt_tokens_by_source`); default: as v0.11.0, prompt tokens only.
   */
  computedTokens?: boolean;
}

const RANK = 16;

/**
 * A fleet's loads and unloads by kind. Loads: `apiLoads + resolverLoads + engineReloads` (a
 * host-cache miss inside the engine loop). Unloads, one per copy gone: `apiUnloads -
 * apiUnloadsOfEvicted + evictions`. An API unload of weights the host cache had pushed out already
 * (`apiUnloadsOfEvicted`) and the eviction of weights unloaded through the API before
 * (`evictionsAfterUnload`: released vLLM's unload leaves them cached) complete one departure each.
 */
export interface ChurnBreakdown {
  apiLoads: number;
  resolverLoads: number;
  engineReloads: number;
  apiUnloads: number;
  apiUnloadsOfEvicted: number;
  evictions: number;
  evictionsAfterUnload: number;
}

/** A replica's answer to a request longer than its context (vLLM's 400). */
export interface ContextRefusal {
  status: 400;
  message: string;
}

/**
 * A fleet of replicas in virtual time: the simulator's engine model (the same code the HTTP
 * simulator runs), with vLLM's registry and load/unload semantics, as a ReplicaApi the
 * routing core can drive.
 */
export class DesFleet implements ReplicaApi {
  readonly urls: string[];
  readonly engines: ReplicaEngine[];
  /** Per replica: registered name -> the weights copy it runs with (vLLM's `lora_int_id`). */
  private readonly registries: Map<string, string>[];
  private readonly byUrl = new Map<string, number>();
  /** One replica's context (its KV capacity): longer requests get vLLM's 400. */
  private readonly contextTokens: number;
  loads = 0;
  /** Unloads through the API. */
  unloads = 0;
  /** How the loads and unloads came about (see ChurnBreakdown). */
  private readonly churn = { resolverLoads: 0, unloadsHeld: 0, evictions: 0, evictionsAfterUnload: 0 };
  /** Per replica: copies unloaded through the API whose weights the host cache still holds. */
  private readonly unloadedCached: Set<string>[];
  /** Unloads answered while the adapter had requests in the engine (must stay 0). */
  busyUnloads = 0;
  private nextId = 0;
  private nextCopy = 1;
  private readonly resolving = new Map<string, Promise<void>>();

  constructor(
    private readonly clock: Clock,
    readonly o: DesFleetOptions,
  ) {
    const pooled = o.mode === 'pooled';
    const unlimited = o.mode === 'oracle' || pooled;
    const cost = unlimited ? loadCostFor(0, RANK) : o.loadMs === undefined ? {} : loadCostFor(o.loadMs, RANK);
    this.contextTokens = { ...defaultEngineOptions, ...o.engine }.kvCapacityTokens;
    this.urls = Array.from({ length: pooled ? 1 : o.replicas }, (_, i) => `http://replica-${i}:8000`);
    this.urls.forEach((u, i) => this.byUrl.set(u, i));
    this.engines = this.urls.map(
      () =>
        new ReplicaEngine(clock, {
          ...o.engine,
          maxLoras: unlimited ? Infinity : o.slots,
          // One host slot beyond the router's bound: released vLLM's unload leaves the weights
          // cached, and without the spare slot they push registered adapters out (docs/replica-apis.md).
          maxCpuLoras: unlimited ? Infinity : (o.engine?.maxCpuLoras ?? o.slots + 1),
          ...cost,
          ...(pooled ? pooledEngine({ ...defaultEngineOptions, ...o.engine }, o.replicas) : {}),
        }),
    );
    this.registries = this.urls.map(() => new Map());
    this.unloadedCached = this.urls.map(() => new Set());
    // Released vLLM's unload leaves the weights cached: their eviction later completes that
    // unload and is no second one. Any other eviction is a copy gone.
    this.engines.forEach((e, i) =>
      e.onEviction((w) => {
        if (this.unloadedCached[i]!.delete(w)) this.churn.evictionsAfterUnload++;
        else this.churn.evictions++;
      }),
    );
  }

  /** Loads so far: through the API (managed) plus reloads inside the engine loop. */
  totalLoads(): number {
    return this.loads + this.engineReloads();
  }

  /** Reloads inside the engine loop (a host-cache miss), over every replica. */
  engineReloads(): number {
    return this.engines.reduce((n, e) => n + e.stats().cacheMissLoads, 0);
  }

  /**
   * Unloads so far, one per copy gone: through the API, or evicted from an engine's host cache.
   * A copy unloaded through the API and evicted later, or evicted and unloaded later, counts once.
   */
  totalUnloads(): number {
    return this.churn.unloadsHeld + this.churn.evictions;
  }

  /** The loads and unloads by kind (bench/des/churn-breakdown.ts). */
  churnBreakdown(): ChurnBreakdown {
    return {
      apiLoads: this.loads - this.churn.resolverLoads,
      resolverLoads: this.churn.resolverLoads,
      engineReloads: this.engineReloads(),
      apiUnloads: this.unloads,
      apiUnloadsOfEvicted: this.unloads - this.churn.unloadsHeld,
      evictions: this.churn.evictions,
      evictionsAfterUnload: this.churn.evictionsAfterUnload,
    };
  }

  /**
   * Sends a request to replica `url`; resolves with its record when it finishes, or with vLLM's
   * 400 when prompt and answer exceed the replica's context (answered before any adapter load,
   * as vLLM validates the input before it queues it).
   */
  async submit(
    url: string,
    adapter: string | null,
    promptTokens: number,
    outputTokens: number,
    blocks?: readonly string[],
    priority?: number,
  ): Promise<RequestRecord | ContextRefusal> {
    const i = this.index(url);
    const engine = this.engines[i]!;
    // A replica's context, also in the pooled engine: pooling adds capacity, not context length.
    const tooLong = contextLengthError(this.contextTokens, promptTokens, outputTokens);
    if (tooLong) return { status: 400, message: tooLong.message };
    if (this.o.mode === 'resolver' && adapter !== null) await this.resolve(i, adapter);
    return new Promise((resolve) => {
      engine.submit({
        id: String(this.nextId++),
        adapter,
        weights: adapter === null ? undefined : this.registries[i]!.get(adapter),
        adapterRank: RANK,
        promptTokens,
        blocks,
        maxTokens: outputTokens,
        ...(priority === undefined ? {} : { priority }),
        onFinish: resolve,
      });
    });
  }

  async scrape(replica: ReplicaSpec): Promise<Scrape> {
    const i = this.index(replica.url);
    const s = this.engines[i]!.stats();
    return {
      load: {
        waiting: s.waiting,
        running: s.running,
        kvUsage: s.kvUsage,
        activeAdapters: [...new Set([...s.runningAdapters, ...s.waitingAdapters])].sort(),
        malformedLines: 0,
        // What vLLM's scrape gives the work model: its prompt-token counter, KV capacity and prefill histograms.
        promptTokensTotal: s.promptTokensTotal,
        firstTokensTotal: s.firstTokensTotal,
        kvCapacityTokens: this.engines[i]!.options.kvCapacityTokens,
        // Its prefill histograms' sums, from which the router learns the prefill rate.
        finishedPromptTokens: s.finishedPromptTokens,
        prefillSeconds: s.prefillSeconds,
        // And its decode histograms, the decode time per token.
        generationTokens: s.generationTokens,
        finishedRequests: s.finishedRequests,
        decodeSeconds: s.decodeSeconds,
        ...(this.o.computedTokens
          ? {
              finishedComputedTokens: s.finishedComputedTokens,
              computedTokensTotal: s.computedPromptTokensTotal,
            }
          : {}),
      },
      registry: [...this.registries[i]!.keys()].map((name) => ({ name, path: `/adapters/${name}` })),
    };
  }

  /** Adapter names registered on replica `i` (what its /v1/models lists). */
  registeredOn(i: number): string[] {
    return [...this.registries[i]!.keys()];
  }

  async loadAdapter(url: string, name: string): Promise<LoadOutcome> {
    const i = this.index(url);
    if (this.registries[i]!.has(name)) return 'already-loaded';
    await this.register(i, name);
    return 'loaded';
  }

  async unloadAdapter(url: string, name: string): Promise<UnloadOutcome> {
    const i = this.index(url);
    const weights = this.registries[i]!.get(name);
    if (weights === undefined) return 'absent';
    this.registries[i]!.delete(name);
    if (this.engines[i]!.inFlight(name) > 0) this.busyUnloads++;
    const engine = this.engines[i]!;
    // Already evicted (and not read again since): that eviction was this copy's departure.
    if (engine.holdsWeights(weights)) {
      this.churn.unloadsHeld++;
      if (this.o.unload === 'frees') engine.dropWeights(weights);
      else this.unloadedCached[i]!.add(weights);
    }
    this.unloads++;
    return 'unloaded';
  }

  /**
   * The filesystem resolver (serving_models.py `resolve_lora`): a name not registered yet loads
   * eagerly, once, under its lock; concurrent requests for it wait for that load.
   */
  private resolve(i: number, name: string): Promise<void> {
    if (this.registries[i]!.has(name)) return Promise.resolve();
    const key = `${i} ${name}`;
    let pending = this.resolving.get(key);
    if (!pending) {
      pending = this.register(i, name).then(() => {
        this.churn.resolverLoads++;
        this.resolving.delete(key);
      });
      this.resolving.set(key, pending);
    }
    return pending;
  }

  /** Loads `name`'s weights on replica `i` and registers them (the engine loop waits). */
  private async register(i: number, name: string): Promise<void> {
    // Every load takes a new lora_int_id: a copy left behind by an unload is not reused.
    const weights = `${name}#${this.nextCopy++}`;
    await this.engines[i]!.loadWeights(weights, RANK);
    this.registries[i]!.set(name, weights);
    this.loads++;
  }

  private index(url: string): number {
    const i = this.byUrl.get(url);
    if (i === undefined) throw new Error(`no replica ${url}`);
    return i;
  }
}

/**
 * One engine with the capacity of `n`: n times the running slots and KV cache, a prompt token
 * prefilled n times faster, and a decode step of n·b sequences as long as one replica's step of b
 * (each further sequence slows it 1/n as much).
 */
function pooledEngine(e: EngineOptions, n: number): Partial<EngineOptions> {
  return {
    maxNumSeqs: e.maxNumSeqs * n,
    kvCapacityTokens: e.kvCapacityTokens * n,
    prefillMsPerToken: e.prefillMsPerToken / n,
    decodeSlowdownPerSeq: e.decodeSlowdownPerSeq / n,
  };
}
