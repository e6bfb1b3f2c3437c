import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { Readable } from 'node:stream';
import { Agent, errors, request as undiciRequest } from 'undici';
import {
  KongDriver,
  KongNode,
  KongRequest,
  type ExitResponse,
  type KongKeys,
  type PluginEntity,
  type RequestInit,
} from '../harness/kong/driver';

/**
 * A Kong service's upstream timeouts in milliseconds, named as in its schema (Kong/kong 3.9.3
 * kong/db/schema/entities/services.lua: integers from 1 to 2^31 - 2, default 60000). Kong hands
 * them to nginx per request (kong/init.lua `Kong.balancer`: `set_timeouts(connect_timeout,
 * write_timeout, read_timeout)` in seconds): connecting, between two writes of the request,
 * between two reads of the response; any of them passing is a 504.
 */
export interface ServiceTimeouts {
  connect_timeout: number;
  write_timeout: number;
  read_timeout: number;
}

export const KONG_DEFAULT_TIMEOUTS: ServiceTimeouts = {
  connect_timeout: 60_000,
  write_timeout: 60_000,
  read_timeout: 60_000,
};

/** Slices of a request body handed to the upstream one at a time (write_timeout is per write). */
const WRITE_SLICE = 64 * 1024;

export interface GatewayPlugin {
  name: string;
  config: Record<string, unknown>;
  keys?: KongKeys;
  /** The plugin entity's `instance_name` (Kong then adds `plugin_instance_name` to its config). */
  instanceName?: string;
}

export interface GatewayOptions {
  driver: KongDriver;
  plugins: GatewayPlugin[];
  /** The Service's own URL: where a request goes when no plugin set a target (Kong's fallback). */
  serviceUrl: string;
  /** An upstream's targets instead: Kong's round-robin balancer picks one per request. */
  upstreamTargets?: string[];
  /** nginx_http_client_body_buffer_size. */
  bodyBufferBytes?: number;
  /** nginx client_max_body_size: larger bodies get 413 before any plugin (0 = no limit). */
  maxBodyBytes?: number;
  /** The service's upstream timeouts (Kong's defaults, 60 s each, for those not given). */
  timeouts?: Partial<ServiceTimeouts>;
  /** Stands in for bundled Lua plugins that run before ours (key-auth...): may end the request. */
  before?: (req: KongRequest) => ExitResponse | undefined;
  /**
   * Stands in for bundled Lua plugins that run after ours (lower priority than lora-router's 900:
   * request-termination at 2, proxy-cache at 100): may end the request once ours decided.
   */
  after?: (req: KongRequest) => ExitResponse | undefined;
  onError?: (msg: string) => void;
  /** CA certificates trusted for `https` upstreams (tests: a self-signed replica). */
  upstreamCa?: string;
  /** nginx workers of this node (each starts its plugin instances lazily); default 2. */
  workers?: number;
  /** Several gateways (routes) of one Kong node share its workers. */
  node?: KongNode;
  /**
   * The route's `response_buffering` (Kong/kong 3.9.3 kong/db/schema/entities/routes.lua:
   * default true, which is nginx's `proxy_buffering on` in kong/templates/nginx_kong.lua;
   * false sends the request to `@unbuffered_response`, kong/runloop/handler.lua).
   */
  responseBuffering?: boolean | ((path: string) => boolean);
  /**
   * Whether the log phase's timer starts: Kong runs external plugins' log phase in
   * `native_timer_at(0, ...)` and never checks its result (plugin.lua 3.9.3), so when the
   * worker's timers are exhausted the log phase is silently skipped.
   */
  logTimerStarts?: (req: KongRequest) => boolean;
}

export interface GatewayReply {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  kong: KongRequest;
}

/** Where a proxied response goes: buffered for a caller, or streamed to an HTTP client. */
interface Sink {
  /** Whether the status line went out (after that, a failure can only cut the response). */
  started: boolean;
  head(status: number, headers: Record<string, string | string[]>, onClientGone?: () => void): void;
  chunk(c: Buffer): void;
  end(): void;
  abort(): void;
  /** A whole response at once (an exit, or a failure before the upstream answered). */
  send(status: number, headers: Record<string, string | string[]>, body: Buffer): void;
  /** Aborted when the client goes away: the upstream request is cancelled. */
  clientGone?: AbortSignal;
}

interface Configured extends PluginEntity {
  priority: number;
  phases: string[];
}

const SIZE_LIMIT_BODY = '{"message":"Request size limit exceeded"}';

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'proxy-connection',
  'host',
  'content-length',
  // nginx answers `Expect: 100-continue` itself and clears it upstream (ngx_http_proxy_headers,
  // src/http/modules/ngx_http_proxy_module.c); undici refuses to send it.
  'expect',
]);

/**
 * Kong's proxy path for one route, on top of the real plugin server: access phases in
 * priority order on one of the node's workers (an exit ends the request), proxy to the target
 * the plugin set (else the service URL), then log phases with the plugin configs collected at
 * access. A development and test harness: not Kong.
 */
export class LocalGateway {
  private plugins: Configured[] = [];
  private rr = 0;
  /** Requests between access and the end of their log phase: close() lets them finish. */
  private readonly active = new Set<Promise<void>>();
  private readonly agent: Agent;
  private readonly timeouts: ServiceTimeouts;
  readonly node: KongNode;

  private constructor(private readonly o: GatewayOptions) {
    this.timeouts = { ...KONG_DEFAULT_TIMEOUTS, ...o.timeouts };
    this.agent = new Agent({
      connections: 256,
      keepAliveTimeout: 10_000,
      connect: { timeout: this.timeouts.connect_timeout, ...(o.upstreamCa ? { ca: o.upstreamCa } : {}) },
    });
    this.node = o.node ?? new KongNode(o.driver, o.workers ?? 2);
    this.node.onError ??= o.onError;
  }

  static async create(o: GatewayOptions): Promise<LocalGateway> {
    const g = new LocalGateway(o);
    await g.configure(o.plugins);
    return g;
  }

  /** The instances the node's workers hold for this gateway's current plugin configs. */
  get instances(): { name: string; id: number; worker: number }[] {
    const current = new Map(this.plugins.map((p) => [String(p.conf.__plugin_id), p.conf.__seq__]));
    return this.node.workers.flatMap((w) =>
      w.instances
        .filter((i) => current.get(i.pluginId) === i.seq)
        .map((i) => ({ name: i.name, id: i.id, worker: w.index })),
    );
  }

  /** The plugin configs as Kong sends them (keys included). */
  get configs(): PluginEntity[] {
    return this.plugins.map(({ name, conf }) => ({ name, conf }));
  }

  /**
   * A config change, as Kong loads one: validated now (a bad config is refused), each plugin
   * keeping its id with a new `__seq__`; no instance starts until a worker runs a request
   * through it, and that worker then closes the instance it replaces.
   */
  async configure(plugins: GatewayPlugin[]): Promise<void> {
    const next: Configured[] = [];
    for (const [i, p] of plugins.entries()) {
      const info = await this.o.driver.pluginInfo(p.name);
      const same = this.plugins[i]?.name === p.name ? this.plugins[i] : undefined;
      const keys: KongKeys = {
        ...(same ? { __plugin_id: String(same.conf.__plugin_id) } : {}),
        ...(p.instanceName !== undefined ? { plugin_instance_name: p.instanceName } : {}),
        ...p.keys,
      };
      const conf = await this.o.driver.kongConfig(p.name, p.config, keys).catch((err: Error) => {
        throw new Error(`plugin ${p.name}: ${err.message}`);
      });
      next.push({ name: p.name, conf, priority: info.Priority, phases: info.Phases });
    }
    this.plugins = next.sort((a, b) => b.priority - a.priority);
  }

  /** Access phases; returns the exit if a plugin (or `before`, `after`) ended the request. */
  private async access(
    req: KongRequest,
    plugins: Configured[],
    worker: ReturnType<KongNode['pick']>,
  ): Promise<ExitResponse | undefined> {
    const early = this.o.before?.(req);
    if (early) {
      req.exit = early;
      req.status = early.status;
      return early;
    }
    for (const p of plugins) {
      if (!p.phases.includes('access')) continue;
      await worker.run(p, 'access', req);
      if (req.exit) return req.exit;
    }
    const late = this.o.after?.(req);
    if (late) {
      req.exit = late;
      req.status = late.status;
    }
    return late;
  }

  /** Log phases, with the configs collected at access (ctx.plugins), on the same worker. */
  private async log(
    req: KongRequest,
    plugins: Configured[],
    worker: ReturnType<KongNode['pick']>,
  ): Promise<void> {
    for (const p of plugins) {
      if (!p.phases.includes('log')) continue;
      if (this.o.logTimerStarts && !this.o.logTimerStarts(req)) continue;
      await worker.run(p, 'log', req);
    }
  }

  /**
   * Where Kong proxies: the target a plugin set, with the scheme it set (else the service's),
   * and the Host header Kong sends: `set_target` sets `upstream_host` to the host alone
   * (kong/pdk/service.lua 3.9.3), so Kong preserves it (kong/runloop/handler.lua); otherwise
   * the balancer's host, with the port unless it is the scheme's default
   * (kong/runloop/balancer/init.lua `set_host_header`).
   */
  private upstream(req: KongRequest): { origin: string; host: string } {
    const service = new URL(this.o.serviceUrl);
    const scheme = req.scheme ?? service.protocol.slice(0, -1);
    if (req.target) {
      const h = req.target.host.includes(':') ? `[${req.target.host}]` : req.target.host;
      return { origin: `${scheme}://${h}:${req.target.port}`, host: h };
    }
    const targets = this.o.upstreamTargets;
    const u = new URL(targets?.length ? targets[this.rr++ % targets.length]! : this.o.serviceUrl);
    return { origin: `${scheme}://${u.host}`, host: u.host };
  }

  /**
   * Sends the request where the plugins pointed it, with the body they set, under the
   * service's timeouts: connect_timeout in the agent, read_timeout for the response head and
   * between body chunks, write_timeout between writes of the request body (`sending`).
   */
  private forward(req: KongRequest, sending: WriteWatch, clientGone?: AbortSignal) {
    const { origin, host } = this.upstream(req);
    const body = req.serviceBody !== undefined ? Buffer.from(req.serviceBody) : req.body;
    const signals = [sending.signal, ...(clientGone ? [clientGone] : [])];
    return undiciRequest(origin + req.path, {
      method: req.method as 'POST',
      headers: this.proxyHeaders(req, host, body ? body.length : null),
      // undici takes an async iterable body (lib/core/request.js `isIterable`); its types name Readable.
      body: body ? (sending.slices(body) as unknown as Readable) : undefined,
      dispatcher: this.agent,
      headersTimeout: this.timeouts.read_timeout,
      bodyTimeout: this.timeouts.read_timeout,
      signal: AbortSignal.any(signals),
    });
  }

  private proxyHeaders(req: KongRequest, host: string, bodyLength: number | null): Record<string, string> {
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (!HOP_BY_HOP.has(k)) out[k] = v;
    out.host = host;
    if (bodyLength !== null) out['content-length'] = String(bodyLength);
    return out;
  }

  /**
   * Kong's path for one request: access phases (an exit ends it), proxy to the target, log
   * phases. Where the response goes is the sink's business (buffered, or streamed to a client).
   */
  private proxy(req: KongRequest, sink: Sink): Promise<void> {
    const p = this.proxyOnce(req, sink);
    this.active.add(p);
    const done = () => void this.active.delete(p);
    p.then(done, done);
    return p;
  }

  private async proxyOnce(req: KongRequest, sink: Sink): Promise<void> {
    const plugins = this.plugins;
    const worker = this.node.pick();
    try {
      const exit = req.exit ?? (await this.access(req, plugins, worker));
      // kong/pdk/response.lua (3.9.3) `send`: exit's headers are set after earlier set_header calls.
      if (exit) return sink.send(exit.status, mergeHeaders(req.responseHeaders, exit.headers), exit.body);
      const sending = new WriteWatch(this.timeouts.write_timeout);
      try {
        const up = await this.forward(req, sending, sink.clientGone).finally(() => sending.stop());
        req.status = up.statusCode;
        const headers: Record<string, string | string[]> = { ...req.responseHeaders };
        for (const [k, v] of Object.entries(up.headers))
          if (v !== undefined && !HOP_BY_HOP.has(k)) headers[k] = v;
        sink.head(up.statusCode, headers, () => up.body.destroy());
        const buffering = this.o.responseBuffering;
        if ((typeof buffering === 'function' ? buffering(req.path) : buffering) === false) {
          for await (const chunk of up.body) sink.chunk(chunk as Buffer);
        } else {
          // proxy_buffering on: nginx gathers the response before passing it on.
          const all: Buffer[] = [];
          for await (const chunk of up.body) all.push(chunk as Buffer);
          if (all.length) sink.chunk(Buffer.concat(all));
        }
        sink.end();
      } catch (err) {
        // The client went away: nginx closes the upstream connection too (proxy_ignore_client_abort
        // off, ngx_http_upstream_check_broken_connection) and logs 499.
        if (sink.clientGone?.aborted) {
          req.status = 499;
          return sink.abort();
        }
        if (sink.started) return sink.abort();
        const failure = upstreamFailure(sending.timedOut ?? err);
        req.status = failure.status;
        req.unexpected = true;
        // The client gets Kong's fixed text; the cause (which names the replica) is the operator's.
        this.o.onError?.(`error: ${req.method} ${req.path}: ${failure.status} ${failure.detail}`);
        sink.send(
          failure.status,
          { 'content-type': 'application/json; charset=utf-8' },
          Buffer.from(kongErrorBody(failure.message)),
        );
      }
    } finally {
      await this.log(req, plugins, worker);
    }
  }

  /** One request through the gateway, the response buffered (tests, benchmarks). */
  async handle(init: RequestInit, onChunk?: (chunk: string) => void): Promise<GatewayReply> {
    const req = new KongRequest({ bodyBufferBytes: this.o.bodyBufferBytes, ...init });
    const limit = this.o.maxBodyBytes ?? 0;
    if (limit > 0 && (req.body?.length ?? 0) > limit) {
      req.exit = {
        status: 413,
        body: Buffer.from(SIZE_LIMIT_BODY),
        headers: { 'Content-Type': 'application/json' },
      };
      req.status = 413;
    }
    const reply: GatewayReply = { status: 0, headers: {}, body: Buffer.alloc(0), kong: req };
    const chunks: Buffer[] = [];
    const sink: Sink = {
      started: false,
      head(status, headers) {
        this.started = true;
        reply.status = status;
        for (const [k, v] of Object.entries(headers)) reply.headers[k] = Array.isArray(v) ? v.join(', ') : v;
      },
      chunk(c) {
        chunks.push(c);
        onChunk?.(c.toString('utf8'));
      },
      end: () => (reply.body = Buffer.concat(chunks)),
      abort: () => (reply.body = Buffer.concat(chunks)),
      send(status, headers, body) {
        this.head(status, headers);
        this.chunk(body);
        this.end();
      },
    };
    await this.proxy(req, sink);
    return reply;
  }

  /** One HTTP request through the gateway, the upstream response streamed (SSE included). */
  async serve(inReq: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    let size = 0;
    const limit = this.o.maxBodyBytes ?? 0;
    for await (const c of inReq) {
      size += (c as Buffer).length;
      if (limit > 0 && size > limit) {
        res.writeHead(413, { 'content-type': 'application/json' }).end(SIZE_LIMIT_BODY);
        inReq.destroy();
        return;
      }
      chunks.push(c as Buffer);
    }
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(inReq.headers)) if (typeof v === 'string') headers[k] = v;
    const req = new KongRequest({
      method: inReq.method,
      path: inReq.url ?? '/',
      headers,
      body: chunks.length ? Buffer.concat(chunks) : null,
      bodyBufferBytes: this.o.bodyBufferBytes,
    });
    // Whether or not the response is buffered, a client gone before its end cancels the request.
    const gone = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) gone.abort();
    });
    await this.proxy(req, {
      clientGone: gone.signal,
      started: false,
      head(status, out, onClientGone) {
        this.started = true;
        res.writeHead(status, out);
        res.flushHeaders();
        if (onClientGone) res.on('close', onClientGone);
      },
      chunk: (c) => void res.write(c),
      end: () => void res.end(),
      abort: () => void res.destroy(),
      send(status, out, body) {
        this.started = true;
        res.writeHead(status, { ...out, 'content-length': body.length }).end(body);
      },
    });
  }

  async close(): Promise<void> {
    // A response sent still has its log phase to run (the lease's release): closing the plugin
    // server's connections under it would fail it (read ECONNRESET). Bounded: a hung upstream
    // must not hold the close.
    await Promise.race([
      Promise.allSettled([...this.active]),
      new Promise((r) => setTimeout(r, 5000).unref()),
    ]);
    await this.agent.close();
    this.o.driver.close();
  }
}

/** Response headers, later ones replacing earlier ones whatever their case (nginx's ngx.header). */
function mergeHeaders(...sets: Record<string, string>[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const set of sets)
    for (const [k, v] of Object.entries(set)) {
      for (const old of Object.keys(out)) if (old.toLowerCase() === k.toLowerCase()) delete out[old];
      out[k] = v;
    }
  return out;
}

class WriteTimeoutError extends Error {}

/**
 * nginx's proxy_send_timeout (Kong's write_timeout) for one request: the body goes to undici in
 * slices, and undici asks for the next only once the socket took the last (undici 7
 * lib/dispatcher/client-h1.js `writeIterable` waits for 'drain'), so a wait longer than `ms`
 * between asks is a write that stalled. The request's signal then aborts it.
 */
class WriteWatch {
  private readonly abort = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  timedOut: WriteTimeoutError | undefined;

  constructor(private readonly ms: number) {}

  get signal(): AbortSignal {
    return this.abort.signal;
  }

  async *slices(body: Buffer): AsyncGenerator<Buffer> {
    try {
      for (let at = 0; at < body.length; at += WRITE_SLICE) {
        this.arm();
        yield body.subarray(at, at + WRITE_SLICE);
      }
    } finally {
      this.stop();
    }
  }

  /** The response came (or the request failed): from then on no write can time it out. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private arm(): void {
    clearTimeout(this.timer);
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timedOut = new WriteTimeoutError(`write_timeout (${this.ms} ms) passed sending the request`);
      this.abort.abort(this.timedOut);
    }, this.ms);
  }
}

/**
 * Kong's answers when the upstream fails: 504 for a timeout, 502 for anything else, with the
 * fixed texts of Kong/kong 3.9.3 kong/error_handlers.lua `BODIES` (never the cause); `detail`
 * is the cause, for the log.
 */
function upstreamFailure(err: unknown): { status: number; message: string; detail: string } {
  const e = err as Error & { code?: string };
  if (
    e instanceof errors.HeadersTimeoutError ||
    e instanceof errors.BodyTimeoutError ||
    e instanceof errors.ConnectTimeoutError ||
    e instanceof WriteTimeoutError ||
    e.code === 'UND_ERR_HEADERS_TIMEOUT' ||
    e.code === 'UND_ERR_BODY_TIMEOUT' ||
    e.code === 'UND_ERR_CONNECT_TIMEOUT'
  ) {
    return { status: 504, message: 'The upstream server is timing out', detail: e.message };
  }
  return {
    status: 502,
    message: 'An invalid response was received from the upstream server',
    detail: e.message,
  };
}

/** Kong/kong 3.9.3 kong/tools/http.lua's JSON error template: the message and a request id. */
function kongErrorBody(message: string): string {
  return `{\n  "message":${JSON.stringify(message)},\n  "request_id":"${randomBytes(16).toString('hex')}"\n}`;
}
