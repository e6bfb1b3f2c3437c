import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { SystemClock, type Clock } from '../../src/clock';
import { ReplicaEngine, type EngineOptions, type RequestRecord } from '../engine/engine';
import { fastapiNotFound, llamacppError, vllmError, type ErrorStyle, type SimError } from './errors';
import { MORE_ROUTES, moreAnswer } from './more-endpoints';
import { loraInfoKey, llamacppMetricsText, TTFT_BUCKETS, vllmMetricsText } from './metrics-text';
import {
  chunkBody,
  completionBody,
  parseCompletion,
  sse,
  tokenText,
  usage,
  type Endpoint,
  type ParsedCompletion,
} from './openai';

export type Backend = 'vllm' | 'llamacpp';

export interface StaticAdapter {
  /** vLLM: the served name (`--lora-modules name=path`). llama.cpp: ignored (adapters have ids). */
  name?: string;
  path: string;
  rank?: number;
  /** llama.cpp: initial global scale (`--lora` = 1, `--lora-init-without-apply` = 0). */
  scale?: number;
}

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
   * vLLM's filesystem resolver (`VLLM_PLUGINS=lora_filesystem_resolver`): a request for an
   * unknown `model=foo` registers `<dir>/foo` if it exists; its weights load on first use,
   * inside the engine loop. No bound, no unload.
   */
  resolverDir?: string;
  defaultRank?: number;
  maxLoraRank?: number;
  maxModelLen?: number;
  defaultMaxTokens?: number;
  errorStyle?: ErrorStyle;
  /** Also emit the pre-0.11 `vllm:gpu_cache_usage_perc`. */
  deprecatedKvMetric?: boolean;
  engine?: Partial<EngineOptions>;
  /** Modelled durations are divided by this (ignored when `clock` is given). */
  timeScale?: number;
  clock?: Clock;
  /** llama.cpp: modelled ms that /health answers 503 "Loading model" after (re)start. */
  startupMs?: number;
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
}

export interface RegistryEntry {
  name: string;
  path: string;
  rank: number;
  /** Registered at start rather than through the runtime API. */
  static: boolean;
  created: number;
}

export type Fault =
  | { kind: 'kill' }
  | { kind: 'revive' }
  | { kind: 'hang'; on: boolean }
  | { kind: 'error500'; on: boolean }
  | { kind: 'slowMetrics'; ms: number }
  | { kind: 'failLoads'; count: number; status?: number }
  | { kind: 'dead'; on: boolean }
  | { kind: 'restart'; downtimeMs?: number }
  | { kind: 'clear' };

/** What the simulator's control API and `state()` report. */
export interface ReplicaState {
  backend: Backend;
  url: string;
  registry: RegistryEntry[];
  adapterLog: AdapterLogEntry[];
  requests: RequestRecord[];
  faults: FaultState;
  engine: ReturnType<ReplicaEngine['stats']>;
}

interface FaultState {
  killed: boolean;
  hang: boolean;
  error500: boolean;
  slowMetricsMs: number;
  failLoads: number;
  failLoadStatus: number;
  dead: boolean;
}

const CONTROL_PREFIX = '/_sim/';
const MAX_BODY = 16 * 1024 * 1024;

/**
 * One simulated vLLM or llama.cpp server on a loopback port, answering as the real one does
 * (see docs/replica-apis.md), wrapped around a ReplicaEngine. Fault injection and
 * observability live under `/_sim/` and in methods: never on an OpenAI route.
 */
export class SimReplica {
  readonly backend: Backend;
  readonly clock: Clock;
  readonly engine: ReplicaEngine;
  private readonly o: Required<Omit<ReplicaOptions, 'clock' | 'engine' | 'timeScale' | 'port'>>;
  private server: http.Server | null = null;
  private port: number;
  private sockets = new Set<Socket>();
  private hung = new Set<http.ServerResponse>();
  private registry = new Map<string, RegistryEntry>();
  private loadLocks = new Map<string, Promise<void>>();
  private llamaScales: number[] = [];
  private log: AdapterLogEntry[] = [];
  private records: RequestRecord[] = [];
  private faults: FaultState = freshFaults();
  private loraInfo = new Map<string, number>();
  private lastLoraKey = '';
  private ttftCounts = TTFT_BUCKETS.map(() => 0);
  private ttftSum = 0;
  private ttftCount = 0;
  private readyAt = 0;
  /** Counts (re)starts: a load that spans a restart must not register into the new process. */
  private bootCount = 0;
  private nextId = 0;
  private readonly epochUnix = Date.now() / 1000;
  private readonly createdUnix = Math.floor(Date.now() / 1000);

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
      resolverDir: options.resolverDir ?? '',
      defaultRank: options.defaultRank ?? 16,
      maxLoraRank: options.maxLoraRank ?? 64,
      maxModelLen: options.maxModelLen ?? 8192,
      defaultMaxTokens: options.defaultMaxTokens ?? 16,
      errorStyle: options.errorStyle ?? 'nested',
      deprecatedKvMetric: options.deprecatedKvMetric ?? false,
      startupMs: options.startupMs ?? 0,
    };
    this.port = options.port ?? 0;
    this.engine = new ReplicaEngine(this.clock, {
      ...(llama ? { maxLoras: Infinity, maxCpuLoras: Infinity } : {}),
      ...options.engine,
    });
    this.engine.onRecord((rec) => this.onRecord(rec));
    this.boot();
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

  state(): ReplicaState {
    return {
      backend: this.backend,
      url: this.url,
      registry: [...this.registry.values()],
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

  registered(): string[] {
    return [...this.registry.keys()];
  }

  requestRecords(): RequestRecord[] {
    return [...this.records];
  }

  // ---- start-up -------------------------------------------------------------------------

  private boot(): void {
    this.bootCount++;
    this.registry.clear();
    this.llamaScales = [];
    const now = this.clock.now();
    this.readyAt = now + this.o.startupMs;
    for (const a of this.o.staticAdapters) {
      const rank = a.rank ?? this.o.defaultRank;
      if (this.backend === 'vllm') {
        const name = a.name ?? a.path.split('/').pop()!;
        this.registry.set(name, { name, path: a.path, rank, static: true, created: this.createdUnix });
        this.engine.preload(name, rank);
      } else {
        this.llamaScales.push(a.scale ?? 1);
        this.engine.preload(a.path, rank);
      }
    }
  }

  // ---- HTTP -----------------------------------------------------------------------------

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
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
      .then((raw) => this.route(req.method ?? 'GET', path, raw, res))
      .catch((err: Error) => {
        if (!res.headersSent) this.send(res, this.error(400, 'BadRequestError', err.message));
      });
  }

  private async route(method: string, path: string, raw: Buffer, res: http.ServerResponse): Promise<void> {
    const llama = this.backend === 'llamacpp';
    if (method === 'GET' && path === '/health') return this.health(res);
    if (method === 'GET' && path === '/metrics') return this.metrics(res);
    if (llama && this.clock.now() < this.readyAt) {
      return this.send(res, llamacppError(503, 'unavailable_error', 'Loading model'));
    }
    if (method === 'GET' && path === '/v1/models')
      return this.send(res, { status: 200, body: this.models() });
    if (method === 'POST' && (path === '/v1/chat/completions' || path === '/v1/completions')) {
      const body = parseJson(raw);
      if (body instanceof Error) return this.send(res, this.error(400, 'BadRequestError', body.message));
      return this.completion(path === '/v1/chat/completions' ? 'chat' : 'completions', body, res);
    }
    if (method === 'POST' && MORE_ROUTES.has(path)) return this.send(res, this.more(path, raw));
    if (!llama && this.o.runtimeLoading && method === 'POST' && path === '/v1/load_lora_adapter') {
      return this.send(res, await this.loadAdapter(parseJson(raw)));
    }
    if (!llama && this.o.runtimeLoading && method === 'POST' && path === '/v1/unload_lora_adapter') {
      return this.send(res, this.unloadAdapter(parseJson(raw)));
    }
    if (llama && path === '/lora-adapters') {
      if (method === 'GET') return this.send(res, { status: 200, body: this.llamaAdapters() });
      if (method === 'POST') return this.send(res, this.setLlamaScales(parseJson(raw)));
    }
    if (llama && method === 'GET' && path === '/slots')
      return this.send(res, { status: 200, body: this.slots() });
    if (llama) return this.send(res, llamacppError(404, 'not_found_error', 'File Not Found'));
    return this.send(res, fastapiNotFound);
  }

  /** Embeddings, scores, rerank...: the model check of completions, then an immediate answer. */
  private more(path: string, raw: Buffer): SimError {
    return moreAnswer(path, parseJson(raw), {
      check: (model) =>
        this.backend === 'llamacpp' ||
        model === this.o.baseModel ||
        this.registry.get(model) ||
        this.resolve(model)
          ? undefined
          : this.error(404, 'NotFoundError', `The model \`${model}\` does not exist.`, 'model'),
      badRequest: (message) => this.error(400, 'BadRequestError', message),
      createdUnix: this.createdUnix,
      maxModelLen: this.o.maxModelLen,
      id: () => (this.nextId++).toString(16).padStart(8, '0'),
    });
  }

  private health(res: http.ServerResponse): void {
    if (this.backend === 'llamacpp') {
      if (this.clock.now() < this.readyAt)
        return this.send(res, llamacppError(503, 'unavailable_error', 'Loading model'));
      if (this.faults.dead) return this.send(res, llamacppError(503, 'unavailable_error', 'Server is dead'));
      return this.send(res, { status: 200, body: { status: 'ok' } });
    }
    res.writeHead(this.faults.dead ? 503 : 200, { 'content-length': '0' });
    res.end();
  }

  private metrics(res: http.ServerResponse): void {
    const text =
      this.backend === 'llamacpp'
        ? llamacppMetricsText(this.engine.stats())
        : vllmMetricsText({
            model: this.o.baseModel,
            stats: this.engine.stats(),
            maxLoras: this.engine.options.maxLoras,
            loraInfo: this.currentLoraInfo(),
            ttftCounts: this.ttftCounts,
            ttftSum: this.ttftSum,
            ttftCount: this.ttftCount,
            createdUnix: this.createdUnix,
            emitDeprecatedKvMetric: this.o.deprecatedKvMetric,
          });
    const write = () => {
      if (res.destroyed) return;
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
      res.end(text);
    };
    // Fault delays are wall-clock: they test the router's real timeouts.
    if (this.faults.slowMetricsMs > 0) setTimeout(write, this.faults.slowMetricsMs);
    else write();
  }

  /** vLLM adds a `vllm:lora_requests_info` series whenever the running/waiting sets change. */
  private currentLoraInfo(): Map<string, number> {
    const s = this.engine.stats();
    const key = loraInfoKey(this.engine.options.maxLoras, s.runningAdapters, s.waitingAdapters);
    if (key !== this.lastLoraKey || !this.loraInfo.has(key)) {
      this.lastLoraKey = key;
      this.loraInfo.set(key, this.epochUnix + this.clock.now() / 1000);
    }
    return this.loraInfo;
  }

  private models() {
    if (this.backend === 'llamacpp') {
      return {
        object: 'list',
        data: [
          {
            id: this.o.baseModel,
            object: 'model',
            created: this.createdUnix,
            owned_by: 'llamacpp',
            meta: null,
          },
        ],
      };
    }
    const base = {
      id: this.o.baseModel,
      object: 'model',
      created: this.createdUnix,
      owned_by: 'vllm',
      root: this.o.baseModel,
      parent: null,
      max_model_len: this.o.maxModelLen,
      permission: [],
    };
    const cards = [...this.registry.values()].map((e) => ({
      id: e.name,
      object: 'model',
      created: e.created,
      owned_by: 'vllm',
      root: e.path,
      parent: this.o.baseModel,
      max_model_len: null,
      permission: [],
    }));
    return { object: 'list', data: [base, ...cards] };
  }

  // ---- completions ----------------------------------------------------------------------

  private completion(endpoint: Endpoint, body: unknown, res: http.ServerResponse): void {
    const llama = this.backend === 'llamacpp';
    if (this.faults.dead)
      return this.send(res, this.error(500, 'EngineDeadError', 'Engine loop is not running.'));
    const p = parseCompletion(endpoint, body, this.o.defaultMaxTokens);
    if (typeof p === 'string') return this.send(res, this.error(400, 'BadRequestError', p));
    let adapter: string | null = null;
    let rank: number | undefined;
    if (llama) {
      const sel = this.llamaSelection(p.lora);
      if (typeof sel !== 'object') return this.send(res, llamacppError(400, 'invalid_request_error', sel));
      adapter = sel.adapter;
      rank = sel.rank;
    } else if (p.model !== this.o.baseModel) {
      const entry = this.registry.get(p.model) ?? this.resolve(p.model);
      if (!entry) {
        return this.send(
          res,
          this.error(404, 'NotFoundError', `The model \`${p.model}\` does not exist.`, 'model'),
        );
      }
      adapter = entry.name;
      rank = entry.rank;
    }
    if (p.promptTokens + p.maxTokens > this.o.maxModelLen) {
      return this.send(
        res,
        this.error(
          400,
          'BadRequestError',
          `This model's maximum context length is ${this.o.maxModelLen} tokens. However, you requested ${p.promptTokens + p.maxTokens} tokens (${p.promptTokens} in the messages, ${p.maxTokens} in the completion). Please reduce the length of the messages or completion.`,
        ),
      );
    }
    const id = `${endpoint === 'chat' ? 'chatcmpl' : 'cmpl'}-${(this.nextId++).toString(16).padStart(8, '0')}`;
    const created = Math.floor(this.epochUnix + this.clock.now() / 1000);
    // vLLM echoes the adapter name; llama.cpp echoes whatever the client sent.
    const model = p.model;
    const answer: { onToken?: (i: number) => void; onFinish: (rec: RequestRecord) => void } = p.stream
      ? this.streamAnswer(endpoint, id, model, created, p, res)
      : {
          onFinish: (rec: RequestRecord) =>
            this.send(res, {
              status: 200,
              body: completionBody(endpoint, id, model, created, p, rec.outputTokens),
            }),
        };
    let done = false;
    this.engine.submit({
      id,
      adapter,
      adapterRank: rank,
      promptTokens: p.promptTokens,
      maxTokens: p.maxTokens,
      onToken: answer.onToken,
      onFinish: (rec) => {
        done = true;
        // Aborted (the replica was killed or restarted): the connection just drops.
        if (rec.aborted) return void res.destroy();
        answer.onFinish(rec);
      },
    });
    // The client went away: the engine stops working on it.
    res.on('close', () => {
      if (!done) this.engine.abort(id);
    });
  }

  /** SSE: a role chunk first (chat), a chunk per token, a usage chunk if asked, then [DONE]. */
  private streamAnswer(
    endpoint: Endpoint,
    id: string,
    model: string,
    created: number,
    p: ParsedCompletion,
    res: http.ServerResponse,
  ) {
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
    if (endpoint === 'chat')
      res.write(sse(chunkBody(endpoint, id, model, created, { role: 'assistant', content: '' }, null)));
    return {
      onToken: (i: number) => {
        const last = i + 1 >= p.maxTokens;
        res.write(
          sse(chunkBody(endpoint, id, model, created, { content: tokenText(i) }, last ? 'length' : null)),
        );
      },
      onFinish: (rec: RequestRecord) => {
        if (p.includeUsage) {
          res.write(
            sse({
              id,
              object: 'chat.completion.chunk',
              created,
              model,
              choices: [],
              usage: usage(p.promptTokens, rec.outputTokens),
            }),
          );
        }
        res.end(sse('[DONE]'));
      },
    };
  }

  private onRecord(rec: RequestRecord): void {
    this.records.push(rec);
    if (rec.firstToken !== undefined && !rec.aborted) {
      const s = (rec.firstToken - rec.arrival) / 1000;
      this.ttftSum += s;
      this.ttftCount++;
      const i = TTFT_BUCKETS.findIndex((le) => s <= le);
      if (i >= 0) this.ttftCounts[i]!++;
    }
  }

  // ---- vLLM runtime LoRA API ------------------------------------------------------------

  private async loadAdapter(body: unknown): Promise<SimError> {
    const started = this.clock.now();
    const b = (body instanceof Error ? {} : (body ?? {})) as Record<string, unknown>;
    const name = typeof b.lora_name === 'string' ? b.lora_name : '';
    const path = typeof b.lora_path === 'string' ? b.lora_path : '';
    const logged = (r: SimError): SimError => {
      this.log.push({
        at: this.clock.now(),
        op: 'load',
        name,
        path,
        status: r.status,
        ms: this.clock.now() - started,
      });
      return r;
    };
    if (!name || !path) {
      return logged(
        this.error(400, 'InvalidUserInput', "Both 'lora_name' and 'lora_path' must be provided."),
      );
    }
    // vLLM serialises loads of one name; the second caller then finds it registered.
    const prior = this.loadLocks.get(name);
    let release!: () => void;
    const mine = new Promise<void>((r) => (release = r));
    const chain = (prior ?? Promise.resolve()).then(() => mine);
    this.loadLocks.set(name, chain);
    try {
      if (prior) await prior;
      if (this.registry.has(name) && b.load_inplace !== true) {
        return logged(
          this.error(400, 'InvalidUserInput', `The lora adapter '${name}' has already been loaded.`),
        );
      }
      const rank = this.adapterRank(path);
      if (rank === undefined) {
        return logged(
          this.error(404, 'NotFoundError', `Loading lora ${name} failed: No adapter found for ${path}`),
        );
      }
      if (rank > this.o.maxLoraRank) {
        return logged(
          this.error(
            400,
            'BadRequestError',
            `LoRA rank ${rank} is greater than max_lora_rank ${this.o.maxLoraRank}.`,
          ),
        );
      }
      const epoch = this.bootCount;
      try {
        await this.engine.loadWeights(name, rank);
      } catch (err) {
        return logged(
          this.error(500, 'InternalServerError', `Loading lora ${name} failed: ${(err as Error).message}`),
        );
      }
      if (epoch !== this.bootCount) {
        return logged(
          this.error(500, 'InternalServerError', `Loading lora ${name} failed: replica restarted`),
        );
      }
      if (this.faults.failLoads > 0) {
        // Checked after the load time: a real failure costs the time too.
        this.faults.failLoads--;
        const st = this.faults.failLoadStatus;
        return logged(
          this.error(
            st,
            st >= 500 ? 'InternalServerError' : 'BadRequestError',
            `Loading lora ${name} failed: simulated fault`,
          ),
        );
      }
      this.registry.set(name, {
        name,
        path,
        rank,
        static: false,
        created: Math.floor(this.epochUnix + this.clock.now() / 1000),
      });
      return logged({ status: 200, body: `Success: LoRA adapter '${name}' added successfully.` });
    } finally {
      release();
      if (this.loadLocks.get(name) === chain) this.loadLocks.delete(name);
    }
  }

  private unloadAdapter(body: unknown): SimError {
    const b = (body instanceof Error ? {} : (body ?? {})) as Record<string, unknown>;
    const name = typeof b.lora_name === 'string' ? b.lora_name : '';
    const logged = (r: SimError, inFlight?: number): SimError => {
      this.log.push({ at: this.clock.now(), op: 'unload', name, status: r.status, ms: 0, inFlight });
      return r;
    };
    if (!name)
      return logged(
        this.error(400, 'InvalidUserInput', "'lora_name' needs to be provided to unload a LoRA adapter."),
      );
    if (!this.registry.has(name))
      return logged(this.error(404, 'NotFoundError', `The lora adapter '${name}' cannot be found.`));
    const inFlight = this.engine.inFlight(name);
    this.registry.delete(name);
    this.engine.dropWeights(name);
    return logged({ status: 200, body: `Success: LoRA adapter '${name}' removed successfully.` }, inFlight);
  }

  /** The filesystem resolver: registers `<resolverDir>/<name>` on first request, if it exists. */
  private resolve(name: string): RegistryEntry | undefined {
    if (!this.o.resolverDir) return undefined;
    const path = `${this.o.resolverDir.replace(/\/$/, '')}/${name}`;
    const rank = this.adapterRank(path);
    if (rank === undefined) return undefined;
    const entry = {
      name,
      path,
      rank,
      static: false,
      created: Math.floor(this.epochUnix + this.clock.now() / 1000),
    };
    this.registry.set(name, entry);
    return entry;
  }

  private adapterRank(path: string): number | undefined {
    if (path in this.o.adapterPaths) return this.o.adapterPaths[path];
    for (const a of this.o.staticAdapters) if (a.path === path) return a.rank ?? this.o.defaultRank;
    for (const dir of this.o.adapterDirs) {
      const d = dir.endsWith('/') ? dir : dir + '/';
      const rest = path.startsWith(d) ? path.slice(d.length) : '';
      if (/^[A-Za-z0-9._-]+$/.test(rest) && rest !== '.' && rest !== '..') return this.o.defaultRank;
    }
    return undefined;
  }

  // ---- llama.cpp adapters ---------------------------------------------------------------

  private llamaAdapters() {
    return this.o.staticAdapters.map((a, id) => ({ id, path: a.path, scale: this.llamaScales[id] ?? 0 }));
  }

  private setLlamaScales(body: unknown): SimError {
    if (!Array.isArray(body))
      return llamacppError(400, 'invalid_request_error', 'Request body must be an array');
    const next = this.parseScales(body, 0);
    if (typeof next === 'string') return llamacppError(400, 'invalid_request_error', next);
    this.llamaScales = next;
    return { status: 200, body: { success: true } };
  }

  /** Which adapter a llama.cpp request runs with: its `lora` field, else the global scales. */
  private llamaSelection(lora: unknown): { adapter: string | null; rank?: number } | string {
    let scales = this.llamaScales;
    if (lora !== undefined) {
      if (!Array.isArray(lora)) return 'lora must be an array';
      const parsed = this.parseScales(lora, 1);
      if (typeof parsed === 'string') return parsed;
      scales = parsed;
    }
    const active = scales.findIndex((s) => s !== 0);
    if (active < 0) return { adapter: null };
    const a = this.o.staticAdapters[active]!;
    return { adapter: a.path, rank: a.rank ?? this.o.defaultRank };
  }

  /** `[{id, scale}]` to a scale per adapter; unlisted adapters get 0. An error message for a bad id. */
  private parseScales(list: unknown[], defaultScale: number): number[] | string {
    const scales = this.llamaScales.map(() => 0);
    for (const e of list as { id?: unknown; scale?: unknown }[]) {
      const id = e?.id;
      if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id >= scales.length)
        return 'invalid adapter id';
      scales[id] = typeof e.scale === 'number' ? e.scale : defaultScale;
    }
    return scales;
  }

  private slots() {
    const s = this.engine.stats();
    const n = this.engine.options.maxNumSeqs;
    return Array.from({ length: n }, (_, id) => ({
      id,
      n_ctx: this.o.maxModelLen,
      is_processing: id < s.running,
    }));
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

  private error(status: number, type: string, message: string, param: string | null = null): SimError {
    if (this.backend === 'llamacpp') {
      const t = status === 404 ? 'not_found_error' : status >= 500 ? 'server_error' : 'invalid_request_error';
      return llamacppError(status, t, message);
    }
    return vllmError(this.o.errorStyle, status, type, message, param);
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

function freshFaults(): FaultState {
  return {
    killed: false,
    hang: false,
    error500: false,
    slowMetricsMs: 0,
    failLoads: 0,
    failLoadStatus: 500,
    dead: false,
  };
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
