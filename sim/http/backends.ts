import type { RequestRecord } from '../engine/engine';
import type { ParsedCompletion } from './openai';
import type { ReplicaContext } from './context';
import { fastapiMethodNotAllowed, fastapiNotFound, llamacppError, vllmError, type SimError } from './errors';
import { LlamaCppAdapters, metricsNotSupported } from './llamacpp';
import { llamacppMetricsText } from './metrics-text';
import { VllmLoraApi } from './vllm-lora';
import { VllmMetricsState } from './vllm-metrics';

/** The adapter a completion runs with: none (the base model), or its engine identity. */
export interface Selected {
  adapter: string | null;
  weights?: string;
  rank?: number;
}

/**
 * What differs between the simulated servers. SimReplica picks one at construction and never
 * branches on the backend itself: HTTP plumbing, faults and the engine are shared.
 */
export interface SimBackend {
  /** Registers the start-up adapters (the registry was just cleared). */
  boot(): void;
  /** An answer to every route but /health and /metrics while the server cannot serve yet. */
  unavailable(): SimError | undefined;
  /** The backend's own routes; undefined when `path` is none of them. */
  route(method: string, path: string, body: () => unknown): Promise<SimError | undefined>;
  /** An unknown path. */
  readonly notFound: SimError;
  /** `/health`: an answer, or a status with an empty body (vLLM). */
  health(dead: boolean): SimError | number;
  /** `/metrics`: Prometheus text, or the server's refusal. */
  metrics(): string | SimError;
  /** `GET /v1/models`. */
  models(): unknown;
  /** The adapter a completion selects, or the error the server answers. */
  select(p: ParsedCompletion): Promise<Selected | SimError>;
  /** Before the other endpoints' model check (embeddings...): resolve the name, if the server does. */
  resolveName(asked: unknown): Promise<SimError | undefined>;
  /** Those endpoints' model check: 404 for a model it does not serve. */
  checkModel(model: string): SimError | undefined;
  /** Sees each request in the engine step that made its first token (for metrics that count them). */
  firstToken?(rec: RequestRecord): void;
  /** An error in this server's format. */
  error(status: number, type: string, message: string, param: string | null): SimError;
}

/** vLLM's OpenAI server (vllm/entrypoints/openai/; see docs/replica-apis.md). */
export class VllmBackend implements SimBackend {
  readonly lora: VllmLoraApi;
  readonly metricsState: VllmMetricsState;
  readonly notFound = fastapiNotFound;

  constructor(
    private readonly r: ReplicaContext,
    private readonly createdUnix: number,
  ) {
    this.lora = new VllmLoraApi(r);
    this.metricsState = new VllmMetricsState(r, createdUnix);
  }

  boot(): void {
    const r = this.r;
    for (const a of r.o.staticAdapters) {
      const rank = a.rank ?? r.o.defaultRank;
      const name = a.name ?? a.path.split('/').pop()!;
      const weights = this.lora.newWeights(name);
      r.registry.set(name, { name, path: a.path, rank, static: true, created: this.createdUnix, weights });
      r.engine.preload(weights, rank);
    }
  }

  unavailable(): undefined {
    return undefined;
  }

  async route(method: string, path: string, body: () => unknown): Promise<SimError | undefined> {
    // `{"version": VLLM_VERSION}` (`show_version`: vllm/entrypoints/openai/api_server.py, by v0.16.0
    // openai/basic/api_router.py; no tag verified, docs/replica-apis.md), whatever the LoRA settings.
    if (method === 'GET' && path === '/version') {
      const { vllmVersion: version, vllmFrontend } = this.r.o;
      // The Rust frontend adds its own build's version (`VersionResponse`, routes/version.rs).
      return {
        status: 200,
        body: vllmFrontend === 'rust' ? { version, rust_frontend_version: version } : { version },
      };
    }
    if (!this.r.o.runtimeLoading) return undefined;
    // Starlette answers a route's path with another method 405 (Route.matches gives a partial
    // match; starlette/routing.py): the routes exist only with runtime loading on.
    if (method !== 'POST')
      return path === '/v1/load_lora_adapter' || path === '/v1/unload_lora_adapter'
        ? fastapiMethodNotAllowed
        : undefined;
    if (path === '/v1/load_lora_adapter') return this.lora.load(body());
    if (path === '/v1/unload_lora_adapter') return this.lora.unload(body());
    return undefined;
  }

  health(dead: boolean): number {
    return dead ? 503 : 200;
  }

  metrics(): string {
    return this.metricsState.text();
  }

  /** Cards as serving_models.py `show_available_models` builds them (vLLM v0.11.0). */
  models() {
    const o = this.r.o;
    const base = {
      id: o.baseModel,
      object: 'model',
      created: this.createdUnix,
      owned_by: 'vllm',
      root: o.baseModel,
      parent: null,
      max_model_len: o.maxModelLen,
      permission: [],
    };
    const cards = [...this.r.registry.values()].map((e) => ({
      id: e.name,
      object: 'model',
      created: e.created,
      owned_by: 'vllm',
      root: e.path,
      parent: o.baseModel,
      max_model_len: null,
      permission: [],
    }));
    return { object: 'list', data: [base, ...cards] };
  }

  async select(p: ParsedCompletion): Promise<Selected | SimError> {
    if (p.model === this.r.o.baseModel) return { adapter: null };
    const entry = this.r.registry.get(p.model) ?? (await this.lora.resolve(p.model));
    if (entry && 'status' in entry) return entry;
    if (!entry) return this.modelNotFound(p.model);
    return { adapter: entry.name, weights: entry.weights, rank: entry.rank };
  }

  async resolveName(asked: unknown): Promise<SimError | undefined> {
    if (typeof asked !== 'string' || this.r.registry.has(asked)) return undefined;
    // The filesystem resolver runs inside every endpoint's model check (serving_engine.py `_check_model`, vLLM v0.11.0).
    const resolved = await this.lora.resolve(asked);
    return resolved && 'status' in resolved ? resolved : undefined;
  }

  checkModel(model: string): SimError | undefined {
    const r = this.r;
    return model === r.o.baseModel || r.registry.get(model) ? undefined : this.modelNotFound(model);
  }

  /** vLLM's 404 for a model it does not serve (serving_engine.py `_check_model`, vLLM v0.11.0). */
  private modelNotFound(model: string): SimError {
    return this.r.error(404, 'NotFoundError', `The model \`${model}\` does not exist.`, 'model');
  }

  firstToken(rec: RequestRecord): void {
    this.metricsState.firstToken(rec);
  }

  error(status: number, type: string, message: string, param: string | null): SimError {
    return vllmError(this.r.o.errorStyle, status, type, message, param);
  }
}

/** llama.cpp's server (tools/server/server.cpp; see docs/replica-apis.md). */
export class LlamaCppBackend implements SimBackend {
  readonly adapters: LlamaCppAdapters;
  /** httplib's error handler for an unknown path (tools/server/server-http.cpp, llama.cpp b7193 and b10573). */
  readonly notFound = llamacppError(404, 'not_found_error', 'File Not Found');

  constructor(
    private readonly r: ReplicaContext,
    private readonly createdUnix: number,
    /** Clock time the model finishes loading after the last (re)start. */
    private readonly readyAt: () => number,
  ) {
    this.adapters = new LlamaCppAdapters(r);
  }

  boot(): void {
    this.adapters.boot();
    for (const a of this.r.o.staticAdapters) this.r.engine.preload(a.path, a.rank ?? this.r.o.defaultRank);
  }

  /**
   * middleware_server_state (tools/server/server-http.cpp): 503 "Loading model" until the model is loaded, on every
   * path since PR #18263 (llama.cpp b7516; read there and at b10573); b7193 and b7502 let /models, /v1/models and
   * /api/tags through while loading.
   */
  unavailable(): SimError | undefined {
    if (this.r.clock.now() < this.readyAt()) return llamacppError(503, 'unavailable_error', 'Loading model');
    return undefined;
  }

  async route(method: string, path: string, body: () => unknown): Promise<SimError | undefined> {
    if (path === '/lora-adapters') {
      if (method === 'GET') return { status: 200, body: this.adapters.list() };
      if (method === 'POST') return this.adapters.setGlobal(body());
    }
    if (method === 'GET' && path === '/slots') return this.adapters.slots();
    return undefined;
  }

  health(dead: boolean): SimError {
    const loading = this.unavailable();
    if (loading) return loading;
    // Not found upstream: llama-server has no dead state (only loading and ready, tools/server/server.cpp,
    // llama.cpp b7193); the simulator's `dead` fault, worded by the simulator.
    if (dead) return llamacppError(503, 'unavailable_error', 'Server is dead');
    // get_health (tools/server/server.cpp at llama.cpp b7193, server-context.cpp at b10573).
    return { status: 200, body: { status: 'ok' } };
  }

  metrics(): string | SimError {
    if (!this.r.o.llamaMetrics) return metricsNotSupported;
    return llamacppMetricsText(this.r.engine.stats());
  }

  /**
   * get_models (tools/server/server.cpp, llama.cpp b7193): one card, `owned_by: "llamacpp"`; upstream's `meta`
   * is model_meta() (vocab, n_ctx_train, ...) once loaded and null before, `created` is the time of the call, and an
   * Ollama-style `models` list comes first (b10573, get_res_model_info in server-context.cpp: `meta` always set, and
   * `aliases`, `tags`): the simulator keeps `meta: null` and drops `models`.
   */
  models() {
    return {
      object: 'list',
      data: [
        {
          id: this.r.o.baseModel,
          object: 'model',
          created: this.createdUnix,
          owned_by: 'llamacpp',
          meta: null,
        },
      ],
    };
  }

  async select(p: ParsedCompletion): Promise<Selected | SimError> {
    const sel = this.adapters.select(p.lora);
    // A bad `lora` throws in params_from_json_cmpl (b7193; the field schema at b10573), answered 400
    // invalid_request_error by handle_completions_impl (tools/server/server.cpp at llama.cpp b7193, server-context.cpp
    // at b10573).
    if (typeof sel !== 'object') return llamacppError(400, 'invalid_request_error', sel);
    // Every adapter was loaded at start: a mix of them costs no load.
    if (sel.adapter !== null) this.r.engine.preload(sel.adapter, sel.rank ?? this.r.o.defaultRank);
    return { adapter: sel.adapter, rank: sel.rank };
  }

  async resolveName(): Promise<undefined> {
    return undefined;
  }

  /** llama.cpp serves one model whatever `model` names (server-task.cpp params_from_json_cmpl, llama.cpp b7193). */
  checkModel(): undefined {
    return undefined;
  }

  /**
   * The type format_error_response gives each status (tools/server/server-common.cpp, llama.cpp b7193 and b10573):
   * 400 invalid_request_error, 404 not_found_error, 500 server_error (501 and 503 have their own, set by callers).
   * vLLM's create_error_response takes the type from its caller instead (serving_models.py, vLLM v0.11.0).
   */
  error(status: number, _type: string, message: string): SimError {
    const t = status === 404 ? 'not_found_error' : status >= 500 ? 'server_error' : 'invalid_request_error';
    return llamacppError(status, t, message);
  }
}
