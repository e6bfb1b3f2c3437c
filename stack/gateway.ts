import http from 'node:http';
import { Agent, errors, request as undiciRequest } from 'undici';
import {
  KongDriver,
  KongRequest,
  RpcError,
  type ExitResponse,
  type KongKeys,
  type RequestInit,
} from '../test/kong/driver';

export interface GatewayPlugin {
  name: string;
  config: Record<string, unknown>;
  keys?: KongKeys;
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
  upstreamTimeoutMs?: number;
  /** Stands in for bundled Lua plugins that run before ours (key-auth...): may end the request. */
  before?: (req: KongRequest) => ExitResponse | undefined;
  onError?: (msg: string) => void;
}

interface Running {
  plugin: GatewayPlugin;
  id: number;
  priority: number;
  phases: string[];
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
 * Kong's proxy path for one service, on top of the real plugin server: access phases in
 * priority order (an exit ends the request), proxy to the target the plugin set (else the
 * service URL), log phases for every request. A development and test harness: not Kong.
 */
export class LocalGateway {
  private running: Running[] = [];
  private rr = 0;
  private readonly agent = new Agent({ connections: 256, keepAliveTimeout: 10_000 });

  private constructor(private readonly o: GatewayOptions) {}

  static async create(o: GatewayOptions): Promise<LocalGateway> {
    const g = new LocalGateway(o);
    await g.configure(o.plugins);
    return g;
  }

  get instances(): { name: string; id: number }[] {
    return this.running.map((r) => ({ name: r.plugin.name, id: r.id }));
  }

  /** A config change, as Kong makes it: new instances first, then the old ones closed. */
  async configure(plugins: GatewayPlugin[]): Promise<void> {
    const started: Running[] = [];
    for (const p of plugins) started.push(await this.start(p));
    const old = this.running;
    this.running = started.sort((a, b) => b.priority - a.priority);
    for (const r of old) await this.o.driver.closeInstance(r.id).catch(() => undefined);
  }

  private async start(plugin: GatewayPlugin): Promise<Running> {
    const info = await this.o.driver.pluginInfo(plugin.name);
    const inst = await this.o.driver.startInstance(plugin.name, plugin.config, plugin.keys);
    return { plugin, id: inst.Id, priority: info.Priority, phases: info.Phases };
  }

  /** Runs a phase; restarts the instance when the server lost it (it restarted), as Kong does. */
  private async phase(r: Running, phase: string, req: KongRequest): Promise<void> {
    try {
      await this.o.driver.handleEvent(r.id, phase, req);
    } catch (err) {
      if (err instanceof RpcError && /no plugin instance/.test(err.message)) {
        const fresh = await this.start(r.plugin);
        r.id = fresh.id;
        await this.o.driver.handleEvent(r.id, phase, req);
        return;
      }
      throw err;
    }
  }

  /** Access phases; returns the exit if a plugin (or `before`) ended the request. */
  private async access(req: KongRequest): Promise<ExitResponse | undefined> {
    const early = this.o.before?.(req);
    if (early) {
      req.exit = early;
      req.status = early.status;
      return early;
    }
    for (const r of this.running) {
      if (!r.phases.includes('access')) continue;
      try {
        await this.phase(r, 'access', req);
      } catch (err) {
        // Kong logs a plugin-server failure and lets the request through to the service.
        this.o.onError?.(`${r.plugin.name} access failed: ${(err as Error).message}`);
      }
      if (req.exit) return req.exit;
    }
    return undefined;
  }

  private async log(req: KongRequest): Promise<void> {
    for (const r of this.running) {
      if (!r.phases.includes('log')) continue;
      await this.phase(r, 'log', req).catch((err: Error) =>
        this.o.onError?.(`${r.plugin.name} log failed: ${err.message}`),
      );
    }
  }

  private upstream(req: KongRequest): { origin: string; host: string } {
    if (req.target) {
      const h = req.target.host.includes(':') ? `[${req.target.host}]` : req.target.host;
      return { origin: `http://${h}:${req.target.port}`, host: `${h}:${req.target.port}` };
    }
    const targets = this.o.upstreamTargets;
    const u = new URL(targets?.length ? targets[this.rr++ % targets.length]! : this.o.serviceUrl);
    return { origin: u.origin, host: u.host };
  }

  /** Sends the request where the plugins pointed it, with the body they set. */
  private forward(req: KongRequest) {
    const { origin, host } = this.upstream(req);
    const body = req.serviceBody !== undefined ? Buffer.from(req.serviceBody) : req.body;
    return undiciRequest(origin + req.path, {
      method: req.method as 'POST',
      headers: this.proxyHeaders(req, host, body ? body.length : null),
      body: body ?? undefined,
      dispatcher: this.agent,
      headersTimeout: this.o.upstreamTimeoutMs ?? 60_000,
      bodyTimeout: this.o.upstreamTimeoutMs ?? 60_000,
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
  private async proxy(req: KongRequest, sink: Sink): Promise<void> {
    try {
      const exit = req.exit ?? (await this.access(req));
      if (exit) return sink.send(exit.status, { ...exit.headers, ...req.responseHeaders }, exit.body);
      try {
        const up = await this.forward(req);
        req.status = up.statusCode;
        const headers: Record<string, string | string[]> = { ...req.responseHeaders };
        for (const [k, v] of Object.entries(up.headers))
          if (v !== undefined && !HOP_BY_HOP.has(k)) headers[k] = v;
        sink.head(up.statusCode, headers, () => up.body.destroy());
        for await (const chunk of up.body) sink.chunk(chunk as Buffer);
        sink.end();
      } catch (err) {
        if (sink.started) return sink.abort();
        const failure = upstreamFailure(err);
        req.status = failure.status;
        this.o.onError?.(`error: ${req.method} ${req.path}: ${failure.status} ${failure.message}`);
        sink.send(
          failure.status,
          { 'content-type': 'application/json' },
          Buffer.from(JSON.stringify({ message: failure.message })),
        );
      }
    } finally {
      await this.log(req);
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
    await this.proxy(req, {
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
    await this.agent.close();
    this.o.driver.close();
  }
}

/** Kong's answers when the upstream fails: 504 for a timeout, 502 for anything else. */
function upstreamFailure(err: unknown): { status: number; message: string } {
  const e = err as Error & { code?: string };
  if (
    e instanceof errors.HeadersTimeoutError ||
    e instanceof errors.BodyTimeoutError ||
    e.code === 'UND_ERR_HEADERS_TIMEOUT' ||
    e.code === 'UND_ERR_BODY_TIMEOUT'
  ) {
    return { status: 504, message: 'The upstream server is timing out' };
  }
  return { status: 502, message: `An invalid response was received from the upstream server: ${e.message}` };
}
