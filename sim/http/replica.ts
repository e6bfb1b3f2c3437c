import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { SystemClock, type Clock } from '../../src/clock';
import { ReplicaEngine, type EngineOptions, type RequestRecord } from '../engine/engine';
import { textBlocks } from '../engine/prefix-blocks';
import type {
  AdapterLogEntry,
  Backend,
  LlamaLoraMode,
  LoadErrors,
  RegistryEntry,
  ReplicaContext,
  ResolvedOptions,
  StaticAdapter,
  UnloadMode,
  VllmFrontend,
  VllmMetrics,
} from './context';
import { Registry } from './context';
import { contextLength, contextLengthError, type ContextErrors } from '../engine/context';
import { LlamaCppBackend, VllmBackend, type SimBackend } from './backends';
import type { ErrorStyle, SimError } from './errors';
import { freshFaults, type Fault, type FaultState } from './faults';
import { type ChoiceResult, completionBody, type Endpoint, parseCompletion, streamAnswer } from './openai';
import { MORE_ROUTES, moreAnswer } from './more-endpoints';

export type {
  AdapterLogEntry,
  Backend,
  Fault,
  LlamaLoraMode,
  LoadErrors,
  RegistryEntry,
  StaticAdapter,
  UnloadMode,
  VllmFrontend,
  VllmMetrics,
};

export interface ReplicaOptions {
  backend?: Backend;
  host?: string;
  /** 0 = ephemeral. */
  port?: number;
  baseModel?: string;
  /** vLLM `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`: the load/unload routes exist. */
  runtimeLoading?: boolean;
  /** Adapters registered at start (`--lora-modules` / `--lora`). */
  staticAdapters?: StaticAdapter[];
  /** Adapter paths that exist on the replica's disk, with their rank. */
  adapterPaths?: Record<string, number>;
  /** Directories under which any `<dir>/<name>` is an adapter of `defaultRank`. */
  adapterDirs?: string[];
  /**
   * The names the folders in `adapterDirs` hold, as a real adapter folder holds some and not
   * others: a load of any other `<dir>/<name>` is vLLM's 404 "No adapter found". Unset: every
   * well-formed name is there.
   */
  adapterDirHolds?: RegExp;
  /** Base model named by an adapter's adapter_config.json (default: the served model). */
  adapterBaseModels?: Record<string, string>;
  /**
   * vLLM's filesystem resolver (`VLLM_LORA_RESOLVER_CACHE_DIR`, with `VLLM_PLUGINS` unset or
   * listing `lora_filesystem_resolver`; needs `runtimeLoading` too): a request for an unknown
   * `model=foo` loads `<dir>/foo` first. No bound, no unload.
   */
  resolverDir?: string;
  defaultRank?: number;
  maxLoraRank?: number;
  maxModelLen?: number;
  defaultMaxTokens?: number;
  errorStyle?: ErrorStyle;
  /**
   * Also emit `vllm:gpu_cache_usage_perc`: shown through v0.10 (unverified), hidden in v0.11
   * unless `--show-hidden-metrics-for-version=0.10`, deleted in v0.12.0 (PR #29330, release window).
   */
  deprecatedKvMetric?: boolean;
  engine?: Partial<EngineOptions>;
  /** Modelled durations are divided by this (ignored when `clock` is given). */
  timeScale?: number;
  clock?: Clock;
  /** llama.cpp: modelled ms that /health answers 503 "Loading model" after (re)start. */
  startupMs?: number;
  /** vLLM: what an unload frees (default `registry`, every Python-frontend release). */
  unload?: UnloadMode;
  /** vLLM: load error texts (default `released`). */
  loadErrors?: LoadErrors;
  /** vLLM: /metrics families (default `released`). */
  vllmMetrics?: VllmMetrics;
  /**
   * vLLM's API server: `python` (default) or `rust` (`VLLM_USE_RUST_FRONTEND=1`): an unload frees the
   * weights (unless `unload` says otherwise), `/version` adds `rust_frontend_version`, and the LoRA
   * routes answer its texts for "already loaded" and an unknown name.
   */
  vllmFrontend?: VllmFrontend;
  /** vLLM: what `GET /version` answers (default `0.11.0`). */
  vllmVersion?: string;
  /** vLLM `--api-server-count` (default 1): above 1, Prometheus multiprocess mode sums the gauges. */
  apiServers?: number;
  /** vLLM: the over-long prompt text (default `released`; sim/engine/context.ts). */
  contextErrors?: ContextErrors;
  /** llama.cpp: per-request `lora` semantics (default `empty-is-absent`, current builds). */
  llamaLora?: LlamaLoraMode;
  /** llama.cpp `--metrics` (default on here; llama-server's own default is off: /metrics 501). */
  llamaMetrics?: boolean;
  /** llama.cpp `/slots` enabled (default on; `--no-slots` answers 501). */
  llamaSlots?: boolean;
  /** llama.cpp: /lora-adapters lists `task_name` and `prompt_prefix` (newer builds; default on). */
  llamaAdapterInfo?: boolean;
  /** Unix seconds at clock time 0 for a virtual clock (default: now); fixed, a run replays exactly. */
  epochUnix?: number;
}

/** One answer of `exchange`: status, body text and the `Date` header, as ReplicaHttp reads them. */
export interface Exchanged {
  status: number;
  text: string;
  dateS?: number;
}

/** What the simulator's control API and `state()` report. */
export interface ReplicaState {
  backend: Backend;
  url: string;
  registry: RegistryEntry[];
  /** The most runtime-loaded (not start-up) adapters registered at once since the replica started. */
  peakRuntimeAdapters: number;
  adapterLog: AdapterLogEntry[];
  requests: RequestRecord[];
  faults: FaultState;
  engine: ReturnType<ReplicaEngine['stats']>;
}

const CONTROL_PREFIX = '/_sim/';
const MAX_BODY = 16 * 1024 * 1024;

/**
 * One simulated vLLM or llama.cpp server on a loopback port, answering as the real one does
 * (see docs/replica-apis.md), wrapped around a ReplicaEngine. Fault injection and
 * observability live under `/_sim/` and in methods: never on an OpenAI route.
 */
export class SimReplica implements ReplicaContext {
  readonly backend: Backend;
  readonly clock: Clock;
  readonly engine: ReplicaEngine;
  readonly o: ResolvedOptions;
  readonly registry = new Registry();
  readonly log: AdapterLogEntry[] = [];
  /** What differs between vLLM and llama.cpp: chosen once, never branched on here. */
  private readonly api: SimBackend;
  private modelsReadCount = 0;
  private server: http.Server | null = null;
  private port: number;
  private sockets = new Set<Socket>();
  private hung = new Set<http.ServerResponse>();
  private records: RequestRecord[] = [];
  private faults: FaultState = freshFaults();
  private readyAt = 0;
  private boots = 0;
  /** Unix seconds at clock time 0: the system clock counts from the Unix epoch already, a virtual one from 0. */
  private readonly epochUnix: number;
  private readonly createdUnix: number;

  constructor(options: ReplicaOptions = {}) {
    this.backend = options.backend ?? 'vllm';
    this.clock = options.clock ?? new SystemClock(options.timeScale ?? 1);
    const llama = this.backend === 'llamacpp';
    this.o = {
      backend: this.backend,
      host: options.host ?? '127.0.0.1',
      baseModel: options.baseModel ?? 'meta-llama/Llama-3.1-8B-Instruct',
      runtimeLoading: !llama && (options.runtimeLoading ?? true),
      staticAdapters: options.staticAdapters ?? [],
      adapterPaths: options.adapterPaths ?? {},
      adapterDirs: options.adapterDirs ?? [],
      adapterDirHolds: options.adapterDirHolds,
      adapterBaseModels: options.adapterBaseModels ?? {},
      resolverDir: options.resolverDir ?? '',
      defaultRank: options.defaultRank ?? 16,
      maxLoraRank: options.maxLoraRank ?? 64,
      maxModelLen: options.maxModelLen ?? 8192,
      defaultMaxTokens: options.defaultMaxTokens ?? 16,
      errorStyle: options.errorStyle ?? 'nested',
      deprecatedKvMetric: options.deprecatedKvMetric ?? false,
      startupMs: options.startupMs ?? 0,
      unload: options.unload ?? (options.vllmFrontend === 'rust' ? 'frees' : 'registry'),
      vllmFrontend: options.vllmFrontend ?? 'python',
      loadErrors: options.loadErrors ?? 'released',
      vllmMetrics: options.vllmMetrics ?? 'released',
      vllmVersion: options.vllmVersion ?? '0.11.0',
      apiServers: Math.max(1, Math.floor(options.apiServers ?? 1)),
      contextErrors: options.contextErrors ?? 'released',
      llamaLora: options.llamaLora ?? 'empty-is-absent',
      llamaMetrics: options.llamaMetrics ?? true,
      llamaSlots: options.llamaSlots ?? true,
      llamaAdapterInfo: options.llamaAdapterInfo ?? true,
    };
    // A clock on Unix milliseconds (SystemClock) needs no offset; virtual time starts at 0.
    this.epochUnix = this.clock.now() > 1e12 ? 0 : (options.epochUnix ?? Date.now() / 1000);
    this.createdUnix = Math.floor(this.nowUnix());
    this.port = options.port ?? 0;
    this.engine = new ReplicaEngine(this.clock, {
      ...(llama ? { maxLoras: Infinity, maxCpuLoras: Infinity } : {}),
      ...options.engine,
    });
    this.engine.onRecord((rec) => this.onRecord(rec));
    this.engine.onFirstToken((rec) => this.api.firstToken?.(rec));
    this.api = llama
      ? new LlamaCppBackend(this, this.createdUnix, () => this.readyAt)
      : new VllmBackend(this, this.createdUnix);
    this.boot();
  }

  bootCount(): number {
    return this.boots;
  }

  takeLoadFault(): number | undefined {
    if (this.faults.failLoads <= 0) return undefined;
    this.faults.failLoads--;
    return this.faults.failLoadStatus;
  }

  nowUnix(): number {
    return this.epochUnix + this.clock.now() / 1000;
  }

  get url(): string {
    return `http://${this.o.host}:${this.port}`;
  }

  async start(): Promise<string> {
    if (this.server) return this.url;
    const server = http.createServer((req, res) => this.handle(req, res));
    server.keepAliveTimeout = 5000;
    server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, this.o.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
    return this.url;
  }

  /** Close the listener and every connection; engine state is kept (see `restart`). */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    for (const res of this.hung) res.destroy();
    this.hung.clear();
    for (const s of this.sockets) s.destroy();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Apply a fault; the same operations the control API exposes. */
  async fault(f: Fault): Promise<void> {
    switch (f.kind) {
      case 'kill':
        // Connection refused from now on; dropped connections abort their engine requests.
        this.faults.killed = true;
        await this.stop();
        return;
      case 'revive':
        this.faults.killed = false;
        await this.start();
        return;
      case 'hang':
        this.faults.hang = f.on;
        return;
      case 'error500':
        this.faults.error500 = f.on;
        return;
      case 'slowMetrics':
        this.faults.slowMetricsMs = f.ms;
        return;
      case 'failLoads':
        this.faults.failLoads = f.count;
        this.faults.failLoadStatus = f.status ?? 500;
        return;
      case 'dead':
        this.faults.dead = f.on;
        return;
      case 'restart': {
        // A real restart: connections drop, the registry holds only the start-up adapters.
        await this.stop();
        this.engine.reset();
        this.boot();
        this.faults = freshFaults();
        const down = f.downtimeMs ?? 0;
        if (down > 0) await new Promise((r) => setTimeout(r, down));
        await this.start();
        return;
      }
      case 'clear':
        this.faults = { ...freshFaults(), killed: this.faults.killed };
        return;
    }
  }

  /**
   * A restart without a socket (the deterministic simulation, dst/): the engine drops what it
   * runs and waits, the registry holds only the start-up adapters, faults are cleared. The
   * caller models the downtime (calls refused meanwhile).
   */
  reboot(): void {
    this.engine.reset();
    this.boot();
    this.faults = freshFaults();
  }

  state(): ReplicaState {
    return {
      backend: this.backend,
      url: this.url,
      registry: [...this.registry.values()],
      peakRuntimeAdapters: this.registry.peakRuntime(),
      adapterLog: [...this.log],
      requests: [...this.records],
      faults: { ...this.faults },
      engine: this.engine.stats(),
    };
  }

  /** Load/unload calls so far. */
  adapterLog(): AdapterLogEntry[] {
    return [...this.log];
  }

  /** How many times /v1/models was read (polls, and a router's word before a load). */
  modelsReads(): number {
    return this.modelsReadCount;
  }

  registered(): string[] {
    return [...this.registry.keys()];
  }

  requestRecords(): RequestRecord[] {
    return [...this.records];
  }

  // ---- start-up -------------------------------------------------------------------------

  private boot(): void {
    this.boots++;
    this.registry.clear();
    this.readyAt = this.clock.now() + this.o.startupMs;
    this.api.boot();
  }

  // ---- HTTP -----------------------------------------------------------------------------

  /**
   * One HTTP exchange without a socket (the deterministic simulation, dst/): the routes and
   * answers of `handle`, into a response that only collects them. `abort`: the client went away.
   */
  exchange(method: string, path: string, body: string): { reply: Promise<Exchanged>; abort: () => void } {
    let done: (r: Exchanged) => void = () => {};
    const reply = new Promise<Exchanged>((r) => (done = r));
    const closed: (() => void)[] = [];
    let text = '';
    const res = {
      headersSent: false,
      destroyed: false,
      statusCode: 0,
      date: undefined as string | undefined,
      writeHead(status: number, headers?: Record<string, string | number>) {
        res.statusCode = status;
        res.headersSent = true;
        if (typeof headers?.date === 'string') res.date = headers.date;
        return res;
      },
      write(chunk: string) {
        text += chunk;
        return true;
      },
      end(chunk?: string) {
        text += chunk ?? '';
        const date = res.date === undefined ? NaN : Date.parse(res.date);
        done({ status: res.statusCode, text, ...(Number.isFinite(date) ? { dateS: date / 1000 } : {}) });
        for (const fn of closed.splice(0)) fn();
      },
      on(event: string, fn: () => void) {
        if (event === 'close') closed.push(fn);
        return res;
      },
      destroy() {
        if (res.destroyed) return;
        res.destroyed = true;
        done({ status: 0, text: 'connection reset' });
        for (const fn of closed.splice(0)) fn();
      },
    };
    const out = res as unknown as http.ServerResponse;
    void this.route(method, path, Buffer.from(body), out).catch((err: Error) => {
      if (!res.headersSent) this.send(out, this.error(400, 'BadRequestError', err.message));
    });
    return { reply, abort: () => res.destroy() };
  }

  /**
   * Told of every HTTP request as it arrives, before it is answered (a harness records who sent
   * what and when: the fault run's (i) reads it); nothing else depends on it.
   */
  onRequest: ((req: http.IncomingMessage, res: http.ServerResponse) => void) | null = null;

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    this.onRequest?.(req, res);
    const path = (req.url ?? '/').split('?')[0]!;
    if (path.startsWith(CONTROL_PREFIX)) {
      void this.control(req, res, path);
      return;
    }
    if (this.faults.hang) {
      this.hung.add(res);
      res.on('close', () => this.hung.delete(res));
      return;
    }
    if (this.faults.error500) {
      return this.send(
        res,
        this.error(500, 'InternalServerError', 'Internal Server Error (simulated fault)'),
      );
    }
    readBody(req)
      .then((raw) => {
        const named = req.headers['x-request-id'];
        return this.route(req.method ?? 'GET', path, raw, res, typeof named === 'string' ? named : undefined);
      })
      .catch((err: Error) => {
        if (!res.headersSent) this.send(res, this.error(400, 'BadRequestError', err.message));
      });
  }

  private async route(
    method: string,
    path: string,
    raw: Buffer,
    res: http.ServerResponse,
    requestIdHeader?: string,
  ): Promise<void> {
    if (method === 'GET' && path === '/health') return this.health(res);
    if (method === 'GET' && path === '/metrics') return this.metrics(res);
    const unavailable = this.api.unavailable();
    if (unavailable) return this.send(res, unavailable);
    if (method === 'GET' && path === '/v1/models') {
      this.modelsReadCount++;
      return this.send(res, { status: 200, body: this.api.models() });
    }
    if (method === 'POST' && (path === '/v1/chat/completions' || path === '/v1/completions')) {
      const body = parseJson(raw);
      if (body instanceof Error) return this.send(res, this.error(400, 'BadRequestError', body.message));
      const endpoint = path === '/v1/chat/completions' ? 'chat' : 'completions';
      return this.completion(endpoint, body, res, requestIdHeader);
    }
    if (method === 'POST' && MORE_ROUTES.has(path)) return this.send(res, await this.more(path, raw));
    const own = await this.api.route(method, path, () => parseJson(raw));
    return this.send(res, own ?? this.api.notFound);
  }

  /** Embeddings, scores, rerank...: the model check of completions, then an immediate answer. */
  private async more(path: string, raw: Buffer): Promise<SimError> {
    const body = parseJson(raw);
    const refused = await this.api.resolveName((body as { model?: unknown } | null)?.model);
    if (refused) return refused;
    return moreAnswer(path, body, {
      check: (model) => this.api.checkModel(model),
      badRequest: (message) => this.error(400, 'BadRequestError', message),
      // vLLM stamps `created` per request (int(time.time()) in its serving code), not at start.
      createdUnix: Math.floor(this.nowUnix()),
      maxModelLen: this.o.maxModelLen,
      id: requestId,
    });
  }

  private health(res: http.ServerResponse): void {
    const h = this.api.health(this.faults.dead);
    if (typeof h !== 'number') return this.send(res, h);
    res.writeHead(h, { 'content-length': '0' });
    res.end();
  }

  private metrics(res: http.ServerResponse): void {
    const text = this.api.metrics();
    if (typeof text !== 'string') return this.send(res, text);
    const write = () => {
      if (res.destroyed) return;
      // Prometheus text 0.0.4: llama.cpp sets `text/plain; version=0.0.4` (tools/server/server.cpp get_metrics,
      // llama.cpp b7193, b10573); vLLM's prometheus_client adds `; charset=utf-8` (not read at a pinned version).
      // uvicorn's Date, on the clock vLLM's gauges take their times from (the modelled one here).
      res.writeHead(200, {
        'content-type': 'text/plain; version=0.0.4; charset=utf-8',
        date: new Date(this.nowUnix() * 1000).toUTCString(),
      });
      res.end(text);
    };
    // Fault delays are wall-clock: they test the router's real timeouts.
    if (this.faults.slowMetricsMs > 0) setTimeout(write, this.faults.slowMetricsMs);
    else write();
  }

  // ---- completions ----------------------------------------------------------------------

  private async completion(
    endpoint: Endpoint,
    body: unknown,
    res: http.ServerResponse,
    requestIdHeader?: string,
  ): Promise<void> {
    // Text of V0's MQEngineDeadError (vllm/engine/multiprocessing/__init__.py, vLLM v0.10.0 (unverified), the V0 engine); V1's EngineDeadError
    // says "EngineCore encountered an issue..." (vllm/v1/engine/exceptions.py, vLLM v0.11.0) and launcher.py (vLLM v0.11.0)
    // answers a bare 500; newer server_utils.py engine_error_handler (main, December 2026) a JSON error. The body is modelled.
    if (this.faults.dead)
      return this.send(res, this.error(500, 'EngineDeadError', 'Engine loop is not running.'));
    const p = parseCompletion(endpoint, body, this.o.defaultMaxTokens);
    if (typeof p === 'string') return this.send(res, this.error(400, 'BadRequestError', p));
    // No check of `priority` against the policy: V1 passes it on whatever the policy and the fcfs
    // queue never reads it (vllm/v1/engine/processor.py `process_inputs`, FCFSRequestQueue in
    // vllm/v1/core/sched/request_queue.py; v0.11.0, v0.11.2). V0's 400 "Got priority 1 but Priority
    // scheduling is not enabled." went with V0 (PRs #25025, #25033), which no mode models.
    const selected = await this.api.select(p);
    if ('status' in selected) return this.send(res, selected);
    const { adapter, weights, rank } = selected;
    // vLLM's text (sim/engine/context.ts); llama.cpp's own exceed_context_size_error is not modelled: both backends
    // answer vLLM's text here. The context is the KV capacity when max_model_len is larger (vLLM would not start).
    // Each prompt of a batch is checked on its own (create_completion: one engine request per prompt).
    const context = contextLength(this.o.maxModelLen, this.engine.options.kvCapacityTokens);
    for (const prompt of p.prompts) {
      const tooLong = contextLengthError(
        context,
        prompt.tokens,
        p.checkedMaxTokens,
        this.o.contextErrors,
        endpoint,
      );
      if (tooLong) return this.send(res, this.error(400, 'BadRequestError', tooLong.message, tooLong.param));
    }
    // Unchecked (a chat request without max_tokens), the answer stops at the context's end
    // (vllm/entrypoints/utils.py `get_max_tokens`, v0.11.0: at most max_model_len - prompt), per prompt.
    const maxTokens = p.prompts.map((x) => Math.max(1, Math.min(p.maxTokens, context - x.tokens)));
    const named = this.backend === 'vllm' ? (requestIdHeader ?? p.requestId) : undefined;
    const id = completionId(endpoint, named);
    const created = Math.floor(this.nowUnix());
    // vLLM echoes the adapter name (serving_models.py `model_name`, vLLM v0.11.0); llama.cpp echoes the request's
    // `model` (tools/server/server-task.cpp params_from_json_cmpl, llama.cpp b7193).
    const model = p.model;
    const stream = p.stream ? streamAnswer(endpoint, id, model, created, p, res) : undefined;
    const results: ChoiceResult[] = maxTokens.map((m) => ({ outputTokens: 0, maxTokens: m }));
    let left = p.prompts.length;
    let aborted = false;
    const onFinish = (i: number, rec: RequestRecord) => {
      left--;
      // Aborted (the replica was killed or restarted): the connection just drops.
      if (rec.aborted) {
        aborted = true;
        return void res.destroy();
      }
      results[i]!.outputTokens = rec.outputTokens;
      if (left > 0 || aborted) return;
      if (stream) stream.onFinish(results.reduce((n, r) => n + r.outputTokens, 0));
      else
        this.send(res, {
          status: 200,
          body: completionBody(endpoint, id, model, created, p.promptTokens, results),
        });
    };
    // The engine's ids: the completion's, made unique when the client named it; a batch's are
    // `<id>-<i>`, as vLLM names them.
    const engineId = named === undefined ? id : `${id}-${requestId()}`;
    const engineIds = p.prompts.map((_, i) => (p.prompts.length === 1 ? engineId : `${engineId}-${i}`));
    p.prompts.forEach((prompt, i) => {
      this.engine.submit({
        id: engineIds[i]!,
        adapter,
        weights,
        adapterRank: rank,
        promptTokens: prompt.tokens,
        // vLLM's prefix cache (llama.cpp's per-slot prompt cache is not modelled), keyed by adapter too.
        blocks:
          this.backend === 'vllm'
            ? textBlocks(prompt.text, weights ?? adapter ?? '', prompt.tokens)
            : undefined,
        maxTokens: maxTokens[i]!,
        ...(this.backend === 'vllm' && p.priority !== 0 ? { priority: p.priority } : {}),
        onToken: stream ? (t) => stream.onToken(i, t, maxTokens[i]!) : undefined,
        onFinish: (rec) => onFinish(i, rec),
      });
    });
    // The client went away: the engine stops working on what is left.
    res.on('close', () => {
      if (left > 0) for (const e of engineIds) this.engine.abort(e);
    });
  }

  private onRecord(rec: RequestRecord): void {
    this.records.push(rec);
  }

  // ---- control API ----------------------------------------------------------------------

  private async control(req: http.IncomingMessage, res: http.ServerResponse, path: string): Promise<void> {
    try {
      if (req.method === 'GET' && path === '/_sim/state')
        return this.send(res, { status: 200, body: this.state() });
      if (req.method === 'POST' && path === '/_sim/fault') {
        const f = parseJson(await readBody(req)) as Fault;
        if (f instanceof Error || typeof f?.kind !== 'string') {
          return this.send(res, { status: 400, body: { error: 'body must be a fault object with a kind' } });
        }
        if (f.kind === 'kill' || f.kind === 'restart') {
          // Answer first: the listener goes away with the fault.
          this.send(res, { status: 202, body: { applied: f.kind } });
          setImmediate(() => void this.fault(f));
          return;
        }
        await this.fault(f);
        return this.send(res, { status: 200, body: { applied: f.kind } });
      }
      this.send(res, { status: 404, body: { error: 'unknown control route' } });
    } catch (err) {
      this.send(res, { status: 500, body: { error: (err as Error).message } });
    }
  }

  // ---- helpers --------------------------------------------------------------------------

  error(status: number, type: string, message: string, param: string | null = null): SimError {
    return this.api.error(status, type, message, param);
  }

  private send(res: http.ServerResponse, r: SimError): void {
    if (res.headersSent || res.destroyed) return;
    const text = typeof r.body === 'string' ? r.body : JSON.stringify(r.body);
    res.writeHead(r.status, {
      'content-type': typeof r.body === 'string' ? 'text/plain; charset=utf-8' : 'application/json',
      'content-length': Buffer.byteLength(text),
    });
    res.end(text);
  }
}

function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        reject(new Error('Request body too large.'));
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function parseJson(raw: Buffer): unknown {
  if (raw.length === 0) return new Error('Request body is empty; expected JSON.');
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch (err) {
    return new Error(`Invalid JSON in request body: ${(err as Error).message}`);
  }
}

/** vLLM's `random_uuid()`: uuid4 hex (vllm/utils/__init__.py, v0.11.0), unique across replicas and restarts. */
function requestId(): string {
  return randomUUID().replace(/-/g, '');
}

/**
 * vLLM names a completion `chatcmpl-` or `cmpl-` and `_base_request_id`: the client's X-Request-Id
 * header, else the body's `request_id`, whose default is a `random_uuid()`
 * (vllm/entrypoints/openai/serving_chat.py, serving_completion.py and serving_engine.py at v0.11.0
 * and v0.11.2; chat_completion/serving.py, completion/serving.py and engine/serving.py at v0.19.0).
 */
function completionId(endpoint: Endpoint, named: string | undefined): string {
  return `${endpoint === 'chat' ? 'chatcmpl' : 'cmpl'}-${named ?? requestId()}`;
}
