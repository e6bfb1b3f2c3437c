import type { Clock } from '../../src/clock';
import type { ContextErrors } from '../engine/context';
import type { ReplicaEngine } from '../engine/engine';
import type { ErrorStyle, SimError } from './errors';

export type Backend = 'vllm' | 'llamacpp';

/**
 * What vLLM's `unload_lora_adapter` frees (how each tag below was found: docs/replica-apis.md,
 * "First release of each vLLM PR").
 * `registry` models the Python frontend of every release to date (read at vllm 075e9ba825,
 * serving_models.py; quoted at 0.27.2rc0, c0adee9231, in vllm#54839; seen at v0.17.1 in
 * vllm#42207): only the name leaves the API registry, the weights stay in the worker's CPU LRU
 * until evicted. `frees`: the engine's `remove_lora` too: the Rust frontend
 * (`VLLM_USE_RUST_FRONTEND=1`), whose LoRA routes are first in v0.23.0 (PR #43778, in its release
 * notes; `LoraManager::unload_lora` read at vllm 0a44ad5bdb, not at the tag), and the Python one
 * on main (openai/models/serving.py, vllm 00153c8b79; fix PR vllm#54939, no release). In both a
 * later load of the name gets a new `lora_int_id`: a storage read, never a CPU-cache hit.
 */
export type UnloadMode = 'registry' | 'frees';

/**
 * vLLM's API server process: the Python one, or the Rust one (`VLLM_USE_RUST_FRONTEND=1`). `rust`
 * models v0.23.0 and later: its LoRA routes (PR #43778) and `/version` (PR #43854) are first in
 * v0.23.0 (release notes); the texts were read at commits, not at the tag
 * (rust/src/server/src/: lora.rs, routes/lora.rs, routes/version.rs, error.rs; vllm 0a44ad5bdb,
 * 030ea52eff, 00d4191780).
 */
export type VllmFrontend = 'python' | 'rust';

/**
 * vLLM's load error texts. `released` models the statuses of v0.17.x and earlier (texts read at
 * v0.11.0; whether v0.15.0 to v0.17.x already add the `load_inplace` hint is not
 * checked): an engine-side failure comes back as "Call to add_lora method failed: ..." (the
 * utility-call wrapper of vllm/v1/engine/core_client.py), a load the adapter fails is a 400.
 * `main`: such a load answers 500 InternalServerError (vLLM PR #36201, first in v0.18.0 by its
 * release window; read at v0.19.0), "already loaded" adds the `load_inplace` hint (the parameter
 * is PR #31326, v0.15.0; the hint read at v0.19.0) and the prefix is gone (read at main
 * 00153c8b79, `load_lora_adapter` in vllm/entrypoints/openai/models/serving.py; in no release
 * through v0.21.0 by date: upstream main still had it on 2026-05-19), so `main` is a
 * v0.18.0-or-later vLLM with main's texts. At v0.19.0 the 500 and the hint are there, and
 * EngineCore's utility failure still reads "Call to {name} method failed: ..." (core.py); the
 * router reads either.
 */
export type LoadErrors = 'released' | 'main';

/**
 * vLLM's /metrics. `released` models v0.11.0 (read there) and every release before
 * v0.20.0: no `num_requests_waiting_by_reason`, no computed-token families. `by-reason` models
 * v0.20.0 and later: that split (PR #38435, in the v0.20.0 release notes), summing to
 * `num_requests_waiting`, and the computed-token families (PR #33290, v0.16.0; PR #30189, in
 * v0.16.0 by ancestry; both read at v0.19.0). `residency`: the split plus the families of open PR vllm#45411 (no
 * release). `no-stats`: `--disable-log-stats` in any release, where AsyncLLM builds no
 * StatLoggerManager, so no `vllm:` family is exported, `lora_requests_info` included
 * (vllm/v1/engine/async_llm.py, vLLM v0.11.0). In every mode `num_requests_waiting`
 * counts requests deferred by the LoRA budget.
 */
export type VllmMetrics = 'released' | 'by-reason' | 'residency' | 'no-stats';

/**
 * llama.cpp's per-request `lora` field. `clear`: servers up to b7502 clear every scale, then set the
 * listed ones (an empty list = no adapter) and refuse an id they do not have (read at b7193 and
 * b7502). `empty-is-absent`: since PR #18263 (b7516; read there, at b10088 and at b10573) an empty
 * list is no field (the global scales apply; llama.cpp issue 28674), a non-empty one as before, and
 * an unknown id is skipped. `listed-only`: the newest parse only the listed ids, unlisted keep their
 * global scale (not found upstream through b10573).
 */
export type LlamaLoraMode = 'clear' | 'empty-is-absent' | 'listed-only';

export interface StaticAdapter {
  /** vLLM: the served name (`--lora-modules name=path`). llama.cpp: ignored (adapters have ids). */
  name?: string;
  path: string;
  rank?: number;
  /** llama.cpp: initial global scale (`--lora` = 1, `--lora-init-without-apply` = 0). */
  scale?: number;
}

export interface AdapterLogEntry {
  at: number;
  op: 'load' | 'unload';
  name: string;
  path?: string;
  status: number;
  /** ms from call to answer, modelled time. */
  ms: number;
  /** Requests of this adapter in the engine when an unload was answered (must be 0). */
  inFlight?: number;
  /** Of `inFlight`: running in the batch, and waiting in the queue (unloads that found the name). */
  running?: number;
  waiting?: number;
  /** Runtime-loaded adapters registered once the call was answered (200 loads and unloads). */
  loaded?: number;
  /** An unload (200) of an entry registered at start (`--lora-modules`), not through the runtime API. */
  static?: true;
  /** Unix ms of the answer on the wall clock, whatever the replica's clock (fault runs line logs up). */
  wallMs?: number;
}

export interface RegistryEntry {
  name: string;
  path: string;
  rank: number;
  /** Registered at start rather than through the runtime API. */
  static: boolean;
  created: number;
  /** The engine's key for this entry's weights (vLLM's `lora_int_id`, as `name#id`). */
  weights: string;
}

/** The options every route module reads, defaults applied. */
export interface ResolvedOptions {
  backend: Backend;
  host: string;
  baseModel: string;
  runtimeLoading: boolean;
  staticAdapters: StaticAdapter[];
  adapterPaths: Record<string, number>;
  adapterDirs: string[];
  adapterDirHolds: RegExp | undefined;
  adapterBaseModels: Record<string, string>;
  resolverDir: string;
  defaultRank: number;
  maxLoraRank: number;
  maxModelLen: number;
  defaultMaxTokens: number;
  errorStyle: ErrorStyle;
  deprecatedKvMetric: boolean;
  startupMs: number;
  unload: UnloadMode;
  loadErrors: LoadErrors;
  vllmMetrics: VllmMetrics;
  vllmFrontend: VllmFrontend;
  vllmVersion: string;
  apiServers: number;
  contextErrors: ContextErrors;
  llamaLora: LlamaLoraMode;
  llamaMetrics: boolean;
  llamaSlots: boolean;
  llamaAdapterInfo: boolean;
}

/**
 * The API registry, tracking the peak of runtime-loaded (not start-up) adapters registered at
 * once since the replica started: tests bound it by the router's slots over a whole run.
 */
export class Registry extends Map<string, RegistryEntry> {
  private peak = 0;

  override set(name: string, entry: RegistryEntry): this {
    super.set(name, entry);
    this.peak = Math.max(this.peak, this.runtimeCount());
    return this;
  }

  peakRuntime(): number {
    return this.peak;
  }

  /** Runtime-loaded (not start-up) adapters registered now. */
  runtimeCount(): number {
    let n = 0;
    for (const e of this.values()) if (!e.static) n++;
    return n;
  }
}

/** What a route module may use of its replica. */
export interface ReplicaContext {
  readonly o: ResolvedOptions;
  readonly clock: Clock;
  readonly engine: ReplicaEngine;
  readonly registry: Registry;
  readonly log: AdapterLogEntry[];
  /** Counts (re)starts: a load that spans a restart must not register into the new process. */
  bootCount(): number;
  /** Failures still to inject into loads (the `failLoads` fault). */
  takeLoadFault(): number | undefined;
  /** Unix seconds now. */
  nowUnix(): number;
  error(status: number, type: string, message: string, param?: string | null): SimError;
}
