import type { LoadOutcome, ReplicaApi, Scrape, UnloadOutcome } from '../../src/backends/replica-api';
import type { Clock } from '../../src/clock';
import type { ReplicaSpec } from '../../src/fleet/types';
import { ReplicaEngine, type EngineOptions, type RequestRecord } from '../../sim/engine/engine';

/**
 * How replicas get adapters. `managed`: only through the runtime load API (lora-router).
 * `resolver`: vLLM's filesystem resolver: any adapter is served, a miss in the `max_cpu_loras`
 * LRU reloads it inside the engine loop (the baselines, which route blind to residency).
 * `oracle`: every adapter resident everywhere, loads free (the TTFT bound).
 */
export type AdapterMode = 'managed' | 'resolver' | 'oracle';

export interface DesFleetOptions {
  replicas: number;
  /** Adapter slots per replica: vLLM max_loras and max_cpu_loras, lora-router max_loaded_adapters. */
  slots: number;
  loadMs: number;
  mode: AdapterMode;
  engine?: Partial<EngineOptions>;
}

const RANK = 16;

/**
 * A fleet of replicas in virtual time: the simulator's engine model (the same code the HTTP
 * simulator runs), with vLLM's registry and load/unload semantics, as a ReplicaApi the
 * routing core can drive.
 */
export class DesFleet implements ReplicaApi {
  readonly urls: string[];
  readonly engines: ReplicaEngine[];
  private readonly registries: Set<string>[];
  private readonly byUrl = new Map<string, number>();
  loads = 0;
  unloads = 0;
  /** Unloads answered while the adapter had requests in the engine (must stay 0). */
  busyUnloads = 0;
  private nextId = 0;

  constructor(
    private readonly clock: Clock,
    readonly o: DesFleetOptions,
  ) {
    const unlimited = o.mode === 'oracle';
    const loadMs = unlimited ? 0 : o.loadMs;
    this.urls = Array.from({ length: o.replicas }, (_, i) => `http://replica-${i}:8000`);
    this.urls.forEach((u, i) => this.byUrl.set(u, i));
    this.engines = this.urls.map(
      () =>
        new ReplicaEngine(clock, {
          ...o.engine,
          maxLoras: unlimited ? Infinity : o.slots,
          maxCpuLoras: unlimited ? Infinity : o.slots,
          loadBaseMs: loadMs,
          loadMsPerRank: 0,
        }),
    );
    this.registries = this.urls.map(() => new Set());
  }

  /** Loads so far: through the API (managed) plus reloads inside the engine loop. */
  totalLoads(): number {
    return this.loads + this.engines.reduce((n, e) => n + e.stats().cacheMissLoads, 0);
  }

  /** Unloads so far: through the API plus evictions from the engines' host caches. */
  totalUnloads(): number {
    return this.unloads + this.engines.reduce((n, e) => n + e.stats().cacheEvictions, 0);
  }

  /** Sends a request to replica `url`; resolves with its record when it finishes. */
  submit(
    url: string,
    adapter: string | null,
    promptTokens: number,
    outputTokens: number,
  ): Promise<RequestRecord> {
    const engine = this.engines[this.index(url)]!;
    return new Promise((resolve) => {
      engine.submit({
        id: String(this.nextId++),
        adapter,
        adapterRank: RANK,
        promptTokens,
        maxTokens: outputTokens,
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
      },
      registry: [...this.registries[i]!].map((name) => ({ name, path: `/adapters/${name}` })),
    };
  }

  async loadAdapter(url: string, name: string): Promise<LoadOutcome> {
    const i = this.index(url);
    if (this.registries[i]!.has(name)) return 'already-loaded';
    await this.engines[i]!.loadWeights(name, RANK);
    this.registries[i]!.add(name);
    this.loads++;
    return 'loaded';
  }

  async unloadAdapter(url: string, name: string): Promise<UnloadOutcome> {
    const i = this.index(url);
    if (!this.registries[i]!.delete(name)) return 'absent';
    if (this.engines[i]!.inFlight(name) > 0) this.busyUnloads++;
    this.engines[i]!.dropWeights(name);
    this.unloads++;
    return 'unloaded';
  }

  private index(url: string): number {
    const i = this.byUrl.get(url);
    if (i === undefined) throw new Error(`no replica ${url}`);
    return i;
  }
}
