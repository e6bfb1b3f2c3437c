import type { Clock } from '../../src/clock';
import { defaultLoadCost, loadMs, type LoadCostOptions } from './load-cost';

/**
 * The one model of a replica's engine in this project: continuous batching with a bounded
 * number of running sequences, an unbounded waiting queue (FIFO, or by priority), vLLM's adapter limits
 * (`max_loras` distinct adapters per batch, `max_cpu_loras` weights cached in host memory)
 * and KV-cache capacity. No HTTP and no clock of its own: the HTTP simulator and the
 * discrete-event benchmark both drive it through an injected Clock.
 */
export interface EngineOptions extends LoadCostOptions {
  /** Running slots (vLLM `--max-num-seqs`, llama.cpp `--parallel`). */
  maxNumSeqs: number;
  /** Distinct adapters in one batch (vLLM `--max-loras`); Infinity for llama.cpp. */
  maxLoras: number;
  /** Adapter weights kept in host memory, LRU (vLLM `--max-cpu-loras`); Infinity = all. */
  maxCpuLoras: number;
  /** KV cache capacity in tokens. */
  kvCapacityTokens: number;
  /** Prefill cost per prompt token, ms. */
  prefillMsPerToken: number;
  /** Decode step time with one running sequence, ms. */
  decodeMsPerStep: number;
  /** Each further running sequence makes a decode step this fraction slower. */
  decodeSlowdownPerSeq: number;
  /**
   * Automatic prefix caching, on by default in vLLM's V1 engine (`CacheConfig.enable_prefix_caching
   * = True`, vllm/config/cache.py, v0.19.0; at v0.11.0 EngineArgs sets it, vllm/engine/arg_utils.py):
   * a prompt's leading KV blocks already cached cost no prefill.
   * Only requests that name their blocks (`EngineRequest.blocks`) can hit.
   */
  prefixCaching: boolean;
  /**
   * vLLM's `--scheduling-policy`: `fcfs` (its default) admits waiting requests in arrival order;
   * `priority` by (request priority, arrival), lower first (PriorityRequestQueue, vllm/v1/core/
   * sched/request_queue.py, vLLM v0.11.0 to v0.19.0). vLLM preempts only when a running request
   * needs KV blocks it cannot get; this engine reserves each request's KV at admission, so it
   * never preempts.
   */
  schedulingPolicy?: 'fcfs' | 'priority';
}

export const defaultEngineOptions: EngineOptions = {
  maxNumSeqs: 16,
  maxLoras: 4,
  maxCpuLoras: 8,
  kvCapacityTokens: 65536,
  prefillMsPerToken: 0.1,
  decodeMsPerStep: 20,
  decodeSlowdownPerSeq: 0.03,
  prefixCaching: true,
  ...defaultLoadCost,
};

/**
 * Tokens per KV block: vLLM's default `block_size` (CacheConfig.DEFAULT_BLOCK_SIZE, vllm/config/cache.py,
 * v0.19.0; at v0.11.0 set for CUDA in vllm/platforms/cuda.py).
 */
export const KV_BLOCK_TOKENS = 16;

export interface EngineRequest {
  id: string;
  /** Adapter selected by the request, or null for the base model. */
  adapter: string | null;
  /**
   * Which cached copy of the weights it runs with (vLLM's `lora_int_id`); defaults to
   * `adapter`. A name unloaded and loaded again is a new copy (see ReplicaOptions.unload).
   */
  weights?: string;
  /** Rank of that adapter: what a reload from its path costs if it left the host cache. */
  adapterRank?: number;
  promptTokens: number;
  /**
   * The prompt's full KV blocks (`KV_BLOCK_TOKENS` each), by a key that names the block and
   * everything before it (vLLM chains each block's hash with its parent's): requests sharing a
   * prefix share its keys. Blocks past the prompt's are its answer's, cached when it finishes (a
   * conversation's next turn opens with this one's prompt and answer). Absent: nothing shared.
   */
  blocks?: readonly string[];
  maxTokens: number;
  /** The body's `priority` (vLLM: lower is served first; 0 when absent). */
  priority?: number;
  onToken?: (index: number) => void;
  onFinish?: (record: RequestRecord) => void;
}

export interface RequestRecord {
  id: string;
  adapter: string | null;
  promptTokens: number;
  /** Of `promptTokens`, those found in the prefix cache when it was scheduled (no prefill). */
  cachedTokens?: number;
  outputTokens: number;
  arrival: number;
  start?: number;
  firstToken?: number;
  end?: number;
  /** Set when the request ended before its last token (client gone, replica killed). */
  aborted?: boolean;
}

export interface EngineStats {
  running: number;
  waiting: number;
  /** Waiting requests held back by `max_loras` alone (their adapter cannot join the batch). */
  waitingForLora: number;
  kvUsage: number;
  runningAdapters: string[];
  waitingAdapters: string[];
  /** Adapter weights in host memory, least recently used first. */
  cachedAdapters: string[];
  /**
   * Prompt tokens of the requests past their first token, counted with it (vLLM's
   * `vllm:prompt_tokens_total`; IterationStats.update_from_output, vllm/v1/metrics/stats.py,
   * vLLM v0.11.0): over `firstTokensTotal`, the mean prompt.
   */
  promptTokensTotal: number;
  /**
   * Requests past their first token, counted in the step that made it (vLLM's
   * `vllm:time_to_first_token_seconds_count`: IterationStats.update_from_output,
   * vllm/v1/metrics/stats.py, observed by PrometheusStatLogger.record, vllm/v1/metrics/loggers.py,
   * vLLM v0.11.0), an aborted request's too once it had its first token.
   */
  firstTokensTotal: number;
  generationTokensTotal: number;
  stepsTotal: number;
  busySlotsTotal: number;
  /** Loads of adapter weights forced inside the engine loop by a host-cache miss. */
  cacheMissLoads: number;
  /** Adapter weights pushed out of the host cache to make room (not counting unloads). */
  cacheEvictions: number;
  /**
   * Over the finished requests past their first token: their prompt tokens and their time from
   * being scheduled to their first token, s (vLLM's `vllm:request_prompt_tokens_sum` and
   * `vllm:request_prefill_time_seconds_sum`, both observed at finish: PrometheusStatLogger.record,
   * vllm/v1/metrics/loggers.py, vLLM v0.11.0).
   */
  finishedPromptTokens: number;
  prefillSeconds: number;
  /** How many requests those sums are over (the histograms' `_count`). */
  finishedRequests: number;
  /**
   * Over the same requests: their generated tokens and their time from first to last token, s
   * (vLLM's `vllm:request_generation_tokens_sum` and `vllm:request_decode_time_seconds_sum`,
   * observed with the two above).
   */
  generationTokens: number;
  decodeSeconds: number;
  /**
   * Prompt tokens by where their KV came from, counted with the first token as
   * `promptTokensTotal`: prefilled here, or found in the prefix cache (vLLM's
   * `vllm:prompt_tokens_by_source{source="local_compute"|"local_cache_hit"}`, PromptTokenStats,
   * vllm/v1/metrics/stats.py, v0.19.0; it adds a fully cached prompt's recomputed last token to
   * the hits too, not modelled).
   */
  computedPromptTokensTotal: number;
  cachedPromptTokensTotal: number;
  /**
   * Prefix-cache lookups, in tokens: a scheduled request's prompt and the part of it found cached,
   * counted when it is scheduled, only with prefix caching on (vLLM's `vllm:prefix_cache_queries`
   * and `vllm:prefix_cache_hits`: KVCacheManager.get_computed_blocks, vllm/v1/core/kv_cache_manager.py,
   * vLLM v0.11.0; vLLM looks a request blocked for KV room up again each step, not modelled).
   */
  prefixCacheQueries: number;
  prefixCacheHits: number;
  /**
   * Over the finished requests of `finishedPromptTokens`: their prompt tokens less those cached
   * (vLLM's `vllm:request_prefill_kv_computed_tokens_sum`, observed at finish).
   */
  finishedComputedTokens: number;
}

interface Seq {
  req: EngineRequest;
  rec: RequestRecord;
  generated: number;
  /** KV tokens reserved at admission (prompt + max output), so no preemption is needed. */
  reserved: number;
}

/**
 * Modelled ms a busy engine may run behind the clock and catch up (see ReplicaEngine.chainAt):
 * five decode steps, several times a loaded host's usual timer lateness at time scale 1-2.
 */
export const MAX_CATCH_UP_MS = 100;

export class ReplicaEngine {
  readonly options: EngineOptions;
  private waiting: Seq[] = [];
  private running: Seq[] = [];
  private kvReserved = 0;
  private kvHeld = 0;
  /** Host-memory adapter cache, Map order = LRU order (first = least recent). */
  private cpuCache = new Map<string, number>();
  /** KV blocks holding a cached prompt prefix, by key; Map order = LRU order (first = least recent). */
  private prefixBlocks = new Map<string, true>();
  /** Engine steps may not start before this time (adapter loads block the loop). */
  private blockedUntil = 0;
  /** When the step under way ends (0 when none is). */
  private stepEndsAt = 0;
  private stepPending = false;
  private cancelStep: (() => void) | null = null;
  /**
   * When the engine is busy, when its next step starts: the modelled end of the one before (or
   * of a load), not when the timer fired. On the wall clock a timer fires late by the host's
   * event-loop lag (1-10 ms under load, against 10 ms decode steps at time scale 2); starting
   * each step from the late firing would add that lag to every step, and the replica would
   * serve slower than the engine model says. A GPU's steps do not wait for the simulator's
   * host: the lag stays a delay on when tokens are sent, never a loss of throughput. Null when
   * idle (the next step starts when work arrives). On a virtual clock timers fire on time and
   * this changes nothing. Set when a step is asked for (idle: the request's arrival).
   */
  private chainAt: number | null = null;
  /** Wall-clock runs: modelled ms the step timers fired late in total, and steps (for the benchmark's report). */
  private lag = { totalMs: 0, steps: 0 };
  private epoch = 0;
  private counters = {
    prompt: 0,
    firstTokens: 0,
    generation: 0,
    steps: 0,
    busySlots: 0,
    cacheMissLoads: 0,
    cacheEvictions: 0,
    finishedPrompt: 0,
    prefillMs: 0,
    finished: 0,
    finishedGeneration: 0,
    decodeMs: 0,
    computed: 0,
    cached: 0,
    prefixQueries: 0,
    prefixHits: 0,
    finishedComputed: 0,
  };
  private listeners: ((rec: RequestRecord) => void)[] = [];
  private firstTokenListeners: ((rec: RequestRecord) => void)[] = [];
  private evictionListeners: ((weights: string) => void)[] = [];

  constructor(
    private readonly clock: Clock,
    options: Partial<EngineOptions> = {},
  ) {
    this.options = { ...defaultEngineOptions, ...options };
  }

  /** Time the weights of an adapter of `rank` take to load. */
  loadTime(rank: number): number {
    return loadMs(this.options, rank);
  }

  /** Called with a request's record in the step that made its first token. */
  onFirstToken(fn: (rec: RequestRecord) => void): void {
    this.firstTokenListeners.push(fn);
  }

  /** Called with every finished or aborted request's record. */
  onRecord(fn: (rec: RequestRecord) => void): void {
    this.listeners.push(fn);
  }

  /** Called with the weights of every adapter the host cache pushes out (`cacheEvictions`). */
  onEviction(fn: (weights: string) => void): void {
    this.evictionListeners.push(fn);
  }

  /** The weights are in the host cache. */
  holdsWeights(weights: string): boolean {
    return this.cpuCache.has(weights);
  }

  submit(req: EngineRequest): RequestRecord {
    const rec: RequestRecord = {
      id: req.id,
      adapter: req.adapter,
      promptTokens: req.promptTokens,
      outputTokens: 0,
      arrival: this.clock.now(),
    };
    if (req.promptTokens + req.maxTokens > this.options.kvCapacityTokens) {
      throw new RangeError(
        `request needs ${req.promptTokens + req.maxTokens} tokens; KV capacity is ${this.options.kvCapacityTokens}`,
      );
    }
    this.enqueue({ req, rec, generated: 0, reserved: req.promptTokens + req.maxTokens });
    this.kick();
    return rec;
  }

  /** Into the waiting queue: at its end, or with `priority` behind every request of its priority or lower value. */
  private enqueue(seq: Seq): void {
    if (this.options.schedulingPolicy !== 'priority') return void this.waiting.push(seq);
    const p = seq.req.priority ?? 0;
    let at = this.waiting.length;
    while (at > 0 && (this.waiting[at - 1]!.req.priority ?? 0) > p) at--;
    this.waiting.splice(at, 0, seq);
  }

  /** When the earliest waiting request came (the queue's head, unless ordered by priority). */
  private firstArrival(): number | undefined {
    if (this.options.schedulingPolicy !== 'priority') return this.waiting[0]?.rec.arrival;
    let first: number | undefined;
    for (const s of this.waiting) if (first === undefined || s.rec.arrival < first) first = s.rec.arrival;
    return first;
  }

  /** Drop a request (client disconnected). Returns false if it had already finished. */
  abort(id: string): boolean {
    const w = this.waiting.findIndex((s) => s.req.id === id);
    if (w >= 0) {
      const [seq] = this.waiting.splice(w, 1);
      this.finish(seq!, true);
      return true;
    }
    const r = this.running.findIndex((s) => s.req.id === id);
    if (r >= 0) {
      const [seq] = this.running.splice(r, 1);
      this.release(seq!);
      this.finish(seq!, true);
      return true;
    }
    return false;
  }

  /**
   * Load an adapter's weights into host memory (vLLM `add_lora`). Loads are serialised with
   * engine steps: no step runs until the load is done. Resolves when the weights are in.
   */
  loadWeights(adapter: string, rank: number): Promise<void> {
    // A utility call runs between engine steps (EngineCore.run_busy_loop, vllm/v1/engine/core.py, vLLM v0.11.0):
    // one that arrives during a step starts when that step ends.
    const start = Math.max(this.clock.now(), this.blockedUntil, this.stepEndsAt);
    this.blockedUntil = start + this.loadTime(rank);
    const epoch = this.epoch;
    return new Promise((resolve, reject) => {
      const end = this.blockedUntil;
      this.clock.after(end - this.clock.now(), () => {
        if (epoch !== this.epoch) return reject(new Error('engine restarted during load'));
        this.cacheInsert(adapter, rank);
        resolve();
        // Steps waiting for this load start when it ends in modelled time, not when its timer fired.
        if (!this.stepPending) this.chainAt = Math.max(this.chainAt ?? end, end);
        this.kick();
      });
    });
  }

  /**
   * Forget adapter weights (vLLM `remove_lora`). Requests still running on them reload them
   * at their next step, as an evicted adapter in use is.
   */
  dropWeights(weights: string): void {
    this.cpuCache.delete(weights);
  }

  /** Preload weights with no cost (adapters given at start). */
  preload(adapter: string, rank: number): void {
    this.cacheInsert(adapter, rank);
  }

  /** Requests of `adapter` running or waiting. */
  inFlight(adapter: string): number {
    const { running, waiting } = this.requestsOf(adapter);
    return running + waiting;
  }

  /** Ids of `adapter`'s requests running or waiting (a test ends one with `abort`). */
  inFlightIds(adapter: string): string[] {
    return [...this.running, ...this.waiting].filter((s) => s.req.adapter === adapter).map((s) => s.req.id);
  }

  /** Requests of `adapter` in the batch (running) and queued (waiting), apart. */
  requestsOf(adapter: string): { running: number; waiting: number } {
    let running = 0;
    let waiting = 0;
    for (const s of this.running) if (s.req.adapter === adapter) running++;
    for (const s of this.waiting) if (s.req.adapter === adapter) waiting++;
    return { running, waiting };
  }

  /**
   * The queue as the engine holds it, read-only: when the step under way ends (0 when none is),
   * each running sequence's KV reservation and tokens still to generate, and each waiting one's
   * prompt, answer and reservation in FIFO order. For a benchmark predictor that reads the
   * engine's own state (bench/des/peers/predictor.ts); routing never sees it.
   */
  queueView(): {
    stepEndsAt: number;
    kvReserved: number;
    running: { reserved: number; left: number }[];
    waiting: { prompt: number; output: number; reserved: number }[];
  } {
    return {
      stepEndsAt: this.stepEndsAt,
      kvReserved: this.kvReserved,
      running: this.running.map((s) => ({ reserved: s.reserved, left: s.req.maxTokens - s.generated })),
      waiting: this.waiting.map((s) => ({
        prompt: s.req.promptTokens,
        output: s.req.maxTokens,
        reserved: s.reserved,
      })),
    };
  }

  /** Everything in flight ends aborted; caches empty (a process restart). */
  reset(): void {
    this.epoch++;
    this.cancelStep?.();
    this.cancelStep = null;
    this.stepPending = false;
    const all = [...this.running, ...this.waiting];
    this.running = [];
    this.waiting = [];
    this.kvHeld = 0;
    this.kvReserved = 0;
    this.cpuCache.clear();
    this.prefixBlocks.clear();
    this.blockedUntil = 0;
    this.stepEndsAt = 0;
    this.chainAt = null;
    for (const seq of all) this.finish(seq, true);
  }

  stats(): EngineStats {
    const batch = new Set(this.running.map(weightsOf).filter((a) => a !== null));
    const full = batch.size >= this.options.maxLoras;
    const forLora = this.waiting.filter((s) => {
      const a = weightsOf(s);
      return full && a !== null && !batch.has(a);
    }).length;
    return {
      running: this.running.length,
      waiting: this.waiting.length,
      waitingForLora: forLora,
      kvUsage: this.kvHeld / this.options.kvCapacityTokens,
      runningAdapters: distinctAdapters(this.running),
      waitingAdapters: distinctAdapters(this.waiting),
      cachedAdapters: [...this.cpuCache.keys()],
      promptTokensTotal: this.counters.prompt,
      firstTokensTotal: this.counters.firstTokens,
      generationTokensTotal: this.counters.generation,
      stepsTotal: this.counters.steps,
      busySlotsTotal: this.counters.busySlots,
      cacheMissLoads: this.counters.cacheMissLoads,
      cacheEvictions: this.counters.cacheEvictions,
      finishedPromptTokens: this.counters.finishedPrompt,
      prefillSeconds: this.counters.prefillMs / 1000,
      finishedRequests: this.counters.finished,
      generationTokens: this.counters.finishedGeneration,
      decodeSeconds: this.counters.decodeMs / 1000,
      computedPromptTokensTotal: this.counters.computed,
      cachedPromptTokensTotal: this.counters.cached,
      prefixCacheQueries: this.counters.prefixQueries,
      prefixCacheHits: this.counters.prefixHits,
      finishedComputedTokens: this.counters.finishedComputed,
    };
  }

  /** Modelled ms step timers fired late, in total and per step (0 on a virtual clock). */
  lagStats(): { totalMs: number; steps: number } {
    return { ...this.lag };
  }

  private kick(): void {
    if (this.stepPending) return;
    if (this.running.length === 0 && this.waiting.length === 0) {
      this.chainAt = null;
      return;
    }
    this.stepPending = true;
    // The step starts now in modelled time (or where the last one ended), however late its timer fires.
    this.chainAt = Math.max(this.chainAt ?? this.clock.now(), this.blockedUntil);
    const delay = Math.max(0, this.blockedUntil - this.clock.now());
    this.cancelStep = this.clock.after(delay, () => this.step());
  }

  /** One engine iteration: admit what fits, then prefill the admitted and decode the rest. */
  private step(): void {
    let now = this.clock.now();
    if (this.chainAt !== null) {
      // Busy: this step starts where the last one (or a load) ended in modelled time. With an
      // empty batch it starts no earlier than the first waiting request came.
      const first = this.running.length === 0 ? this.firstArrival() : undefined;
      // A host that cannot keep up at all (a long stall, a time scale past its speed) gives up
      // the backlog beyond MAX_CATCH_UP_MS: requests that came meanwhile wait for the modelled
      // timeline to reach them, and they must not wait for an ever longer backlog.
      now = Math.max(this.chainAt, first ?? -Infinity, this.clock.now() - MAX_CATCH_UP_MS);
      this.chainAt = null;
    }
    if (now < this.blockedUntil) {
      // A load arrived after this step was scheduled: wait for it, as the engine loop does.
      this.chainAt = this.blockedUntil;
      this.cancelStep = this.clock.after(this.blockedUntil - this.clock.now(), () => this.step());
      return;
    }
    const { maxNumSeqs, maxLoras, kvCapacityTokens, prefillMsPerToken } = this.options;
    const batchAdapters = new Set(this.running.map(weightsOf).filter((a) => a !== null));
    const admitted: Seq[] = [];
    for (let i = 0; i < this.waiting.length && this.running.length < maxNumSeqs; ) {
      const seq = this.waiting[i]!;
      const a = weightsOf(seq);
      // vLLM V1 skips (keeps waiting) a request whose adapter would exceed max_loras, and
      // goes on with the ones behind it (Scheduler.schedule, vllm/v1/core/sched/scheduler.py, vLLM v0.11.0).
      // The skipped keep their order here, as with vLLM PR #32173 (in v0.19.0); v0.11.x put two
      // skipped in one step back in reverse order.
      if (a !== null && !batchAdapters.has(a) && batchAdapters.size >= maxLoras) {
        i++;
        continue;
      }
      if (this.kvReserved + seq.reserved > kvCapacityTokens) break;
      // Came after this step started (in modelled time, see chainAt): the next step takes it.
      // (By priority, one that came earlier may stand behind it.)
      if (seq.rec.arrival > now) {
        if (this.options.schedulingPolicy === 'priority') {
          i++;
          continue;
        }
        break;
      }
      this.waiting.splice(i, 1);
      if (a !== null) batchAdapters.add(a);
      seq.rec.start = now;
      const cached = this.prefixHit(seq.req);
      if (cached > 0) seq.rec.cachedTokens = cached;
      this.kvReserved += seq.reserved;
      this.kvHeld += seq.req.promptTokens;
      // Looked up in the prefix cache when scheduled (KVCacheManager.get_computed_blocks,
      // vllm/v1/core/kv_cache_manager.py, vLLM v0.11.0); its prompt tokens count at its first token.
      if (this.options.prefixCaching) {
        this.counters.prefixQueries += seq.req.promptTokens;
        this.counters.prefixHits += cached;
      }
      this.running.push(seq);
      admitted.push(seq);
    }
    // Every step activates the batch's adapters (LRUCacheWorkerLoRAManager._apply_adapters,
    // vllm/lora/worker_manager.py, vLLM v0.11.0): a cached one is touched, one pushed out of host memory
    // (even while in use) is read again from its path, inside this step.
    let missMs = 0;
    for (const a of batchAdapters) {
      if (this.cpuCache.has(a)) this.touch(a);
      else {
        const rank = this.running.find((s) => weightsOf(s) === a)!.req.adapterRank ?? 16;
        missMs += this.loadTime(rank);
        this.counters.cacheMissLoads++;
        this.cacheInsert(a, rank);
      }
    }
    // A cached prefix costs no prefill: only the tokens after it are computed.
    const prefillTokens = admitted.reduce((n, s) => n + s.req.promptTokens - (s.rec.cachedTokens ?? 0), 0);
    const batch = this.running.length;
    const decodeMs = this.options.decodeMsPerStep * (1 + this.options.decodeSlowdownPerSeq * (batch - 1));
    const duration = missMs + prefillTokens * prefillMsPerToken + decodeMs;
    this.counters.steps++;
    this.counters.busySlots += batch;
    const epoch = this.epoch;
    const end = now + duration;
    this.stepEndsAt = end;
    // Started late (chained, see chainAt): the timer makes up the lag. On time: exactly `duration`.
    const wait = now === this.clock.now() ? duration : Math.max(0, end - this.clock.now());
    this.cancelStep = this.clock.after(wait, () => {
      if (epoch !== this.epoch) return;
      const late = this.clock.now() - end;
      if (late > 0) this.lag.totalMs += late;
      this.lag.steps++;
      this.stepEndsAt = 0;
      this.stepPending = false;
      this.cancelStep = null;
      this.emitTokens(end);
      this.chainAt = end;
      this.kick();
    });
  }

  /** The step that ended at `now` (modelled) emits a token for every running sequence. */
  private emitTokens(now: number): void {
    const still: Seq[] = [];
    for (const seq of this.running) {
      seq.generated++;
      seq.rec.outputTokens = seq.generated;
      this.kvHeld++;
      this.counters.generation++;
      if (seq.generated === 1) {
        seq.rec.firstToken = now;
        this.counters.firstTokens++;
        // vLLM counts a prompt's tokens in the output pass that sees its first token, with its
        // TTFT (IterationStats.update_from_output, vllm/v1/metrics/stats.py, v0.11.0; by source
        // too at v0.19.0): one scheduled but still prefilling, or aborted before, is not counted.
        const cached = seq.rec.cachedTokens ?? 0;
        this.counters.prompt += seq.req.promptTokens;
        this.counters.computed += seq.req.promptTokens - cached;
        this.counters.cached += cached;
        for (const fn of this.firstTokenListeners) fn(seq.rec);
      }
      seq.req.onToken?.(seq.generated - 1);
      if (seq.generated >= seq.req.maxTokens) {
        this.release(seq);
        this.finish(seq, false, now);
      } else still.push(seq);
    }
    this.running = still;
  }

  private release(seq: Seq): void {
    this.kvReserved -= seq.reserved;
    this.kvHeld -= seq.req.promptTokens + seq.generated;
  }

  private finish(seq: Seq, aborted: boolean, at = this.clock.now()): void {
    seq.rec.end = at;
    if (aborted) seq.rec.aborted = true;
    else if (this.options.prefixCaching && seq.req.blocks)
      this.cacheBlocks(
        seq.req.blocks,
        Math.floor(seq.req.promptTokens / KV_BLOCK_TOKENS),
        seq.req.blocks.length,
      );
    if (seq.rec.firstToken !== undefined && seq.rec.start !== undefined) {
      this.counters.finishedPrompt += seq.req.promptTokens;
      this.counters.finishedComputed += seq.req.promptTokens - (seq.rec.cachedTokens ?? 0);
      this.counters.prefillMs += seq.rec.firstToken - seq.rec.start;
      this.counters.finished++;
      this.counters.finishedGeneration += seq.generated;
      this.counters.decodeMs += at - seq.rec.firstToken;
    }
    seq.req.onFinish?.(seq.rec);
    for (const fn of this.listeners) fn(seq.rec);
  }

  /**
   * Tokens of `req`'s prompt already in the prefix cache: its leading blocks found there
   * (KVCacheManager.get_computed_blocks, vllm/v1/core/kv_cache_manager.py), at most all but the
   * last token, which vLLM always computes to produce logits. Then every full block of the prompt
   * is cached, the least recently used pushed out past the KV pool's blocks: freed blocks keep
   * their contents until the pool hands them out again.
   */
  private prefixHit(req: EngineRequest): number {
    if (!this.options.prefixCaching || !req.blocks) return 0;
    const n = Math.min(req.blocks.length, Math.floor(req.promptTokens / KV_BLOCK_TOKENS));
    let hits = 0;
    while (hits < n && this.prefixBlocks.has(req.blocks[hits]!)) hits++;
    this.cacheBlocks(req.blocks, 0, n);
    return Math.max(0, Math.min(hits * KV_BLOCK_TOKENS, req.promptTokens - 1));
  }

  /** Blocks `[from, to)` of `blocks` are cached, most recent last; the oldest go past the pool's size. */
  private cacheBlocks(blocks: readonly string[], from: number, to: number): void {
    for (let i = from; i < to; i++) {
      this.prefixBlocks.delete(blocks[i]!);
      this.prefixBlocks.set(blocks[i]!, true);
    }
    const capacity = Math.floor(this.options.kvCapacityTokens / KV_BLOCK_TOKENS);
    for (const key of this.prefixBlocks.keys()) {
      if (this.prefixBlocks.size <= capacity) break;
      this.prefixBlocks.delete(key);
    }
  }

  private touch(adapter: string): void {
    const rank = this.cpuCache.get(adapter)!;
    this.cpuCache.delete(adapter);
    this.cpuCache.set(adapter, rank);
  }

  /**
   * vLLM's LRUCacheWorkerLoRAManager.add_adapter (vllm/lora/worker_manager.py, v0.11.0, v0.11.2,
   * v0.19.0): load first, then remove the least recently used adapter while over `max_cpu_loras`,
   * in use or not (only pinned adapters are spared, and nothing here pins). v0.6.0 evicts first,
   * then loads (load first since vLLM PR #11727, January 2025).
   */
  private cacheInsert(weights: string, rank: number): void {
    this.cpuCache.delete(weights);
    this.cpuCache.set(weights, rank);
    for (const victim of this.cpuCache.keys()) {
      if (this.cpuCache.size <= this.options.maxCpuLoras) break;
      if (victim === weights) continue;
      this.cpuCache.delete(victim);
      this.counters.cacheEvictions++;
      for (const fn of this.evictionListeners) fn(victim);
    }
  }
}

function weightsOf(s: Seq): string | null {
  return s.req.adapter === null ? null : (s.req.weights ?? s.req.adapter);
}

function distinctAdapters(seqs: Seq[]): string[] {
  const out = new Set<string>();
  for (const s of seqs) if (s.req.adapter !== null) out.add(s.req.adapter);
  return [...out].sort();
}
