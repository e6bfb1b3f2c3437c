import { Agent, errors } from 'undici';
import { BackendError } from './errors';

export interface HttpReply {
  status: number;
  text: string;
  /** The replica's clock when it answered, Unix seconds (its `Date` header, whole seconds); absent if none. */
  dateS?: number;
}

interface Target {
  origin: string;
  path: string;
}

const TARGETS_MAX = 4096;

/**
 * Keep-alive HTTP to replicas: undici's Agent keeps one connection pool per origin, and every
 * call is bounded by its own timeout (connect, headers and body together).
 */
export class ReplicaHttp {
  private readonly agent: Agent;
  private readonly targets = new Map<string, Target>();

  constructor(options: { connectionsPerReplica?: number } = {}) {
    this.agent = new Agent({
      connections: options.connectionsPerReplica ?? 8,
      keepAliveTimeout: 10_000,
      connect: { timeout: 5_000 },
    });
  }

  call(method: 'GET' | 'POST', url: string, timeoutMs: number, body?: unknown): Promise<HttpReply> {
    // Whole milliseconds, as AbortSignal.timeout takes them: what a deadline leaves on the clock
    // has fractions (a RangeError here failed the load before any call).
    timeoutMs = Math.max(1, Math.ceil(timeoutMs));
    return new Promise<HttpReply>((resolve, reject) => {
      const handler = new ReplyHandler(method, url, timeoutMs, resolve, reject);
      try {
        const { origin, path } = this.target(url);
        this.agent.dispatch(
          {
            origin,
            path,
            method,
            headersTimeout: timeoutMs,
            bodyTimeout: timeoutMs,
            headers: body === undefined ? undefined : { 'content-type': 'application/json' },
            body: body === undefined ? undefined : JSON.stringify(body),
          },
          handler,
        );
      } catch (err) {
        // A URL undici cannot call, a body JSON cannot carry: answered as `request` answered them.
        handler.onError(err as Error);
      }
    });
  }

  /** A URL's origin and path as undici's `request` cuts them (lib/core/util.js `parseURL`), once per URL. */
  private target(url: string): Target {
    let t = this.targets.get(url);
    if (t === undefined) {
      const u = new URL(url);
      if (u.protocol !== 'http:' && u.protocol !== 'https:')
        throw new errors.InvalidArgumentError(
          'Invalid URL protocol: the URL must start with `http:` or `https:`.',
        );
      t = { origin: u.origin, path: u.search ? u.pathname + u.search : u.pathname };
      // The URLs called are a few per replica; past the bound (replicas come and go) all are cut again.
      if (this.targets.size >= TARGETS_MAX) this.targets.clear();
      this.targets.set(url, t);
    }
    return t;
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

/**
 * One call's answer, gathered as undici's `request` gathers it for `body.text()` (undici 7.30.2
 * lib/api/api-request.js `RequestHandler`, lib/api/readable.js `chunksDecode`: the chunks joined,
 * a UTF-8 BOM skipped) but without a body stream, an AbortSignal and its listener, or an async
 * resource: the replica polls run every 500 ms in the plugin server and these were most of a
 * poll's own work (docs/benchmarks.md). The bound on the whole call is a timer cleared with the
 * answer (not AbortSignal.timeout, whose timer fired after every call, however fast the answer);
 * fired before the request has a connection, it ends the call at once and aborts the request when
 * it gets one (`request` with an aborted signal waited for that connection to end the call).
 */
class ReplyHandler {
  private abortCall: ((err: Error) => void) | null = null;
  private timedOut: Error | null = null;
  private readonly timer: NodeJS.Timeout;
  private status = 0;
  private date: string | undefined;
  private readonly chunks: Buffer[] = [];
  private length = 0;

  constructor(
    private readonly method: string,
    private readonly url: string,
    private readonly timeoutMs: number,
    private readonly resolve: (r: HttpReply) => void,
    private readonly reject: (err: BackendError) => void,
  ) {
    this.timer = setTimeout(() => {
      this.timedOut = new DOMException('The operation was aborted due to timeout', 'TimeoutError');
      if (this.abortCall) return this.abortCall(this.timedOut);
      // No connection yet (all of the replica's are busy, undici queues the call until one frees):
      // ended now, aborted when it gets one. Else it ended with the call ahead of it, at that
      // call's bound (test/core/http-review-59.test.ts: a 100 ms poll behind a 3 s load).
      this.onError(this.timedOut);
    }, timeoutMs);
    this.timer.unref();
  }

  onConnect(abort: (err?: Error) => void): void {
    if (this.timedOut) return abort(this.timedOut);
    this.abortCall = abort;
  }

  onHeaders(status: number, rawHeaders: Buffer[]): boolean {
    // An informational answer (1xx): the final one follows.
    if (status < 200) return true;
    this.status = status;
    // As undici's parseHeaders joins them: a header given twice reads as both, comma-joined.
    for (let i = 0; i < rawHeaders.length; i += 2) {
      const key = rawHeaders[i]!;
      if (key.length !== 4 || key.toString('latin1').toLowerCase() !== 'date') continue;
      const value = rawHeaders[i + 1]!.toString('latin1');
      this.date = this.date === undefined ? value : `${this.date},${value}`;
    }
    return true;
  }

  onData(chunk: Buffer): boolean {
    this.chunks.push(chunk);
    this.length += chunk.length;
    return true;
  }

  onComplete(): void {
    clearTimeout(this.timer);
    const buf = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.length);
    const bom = buf.length > 2 && buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf ? 3 : 0;
    const date = Date.parse(this.date ?? '');
    this.resolve({
      status: this.status,
      text: buf.toString('utf8', bom),
      ...(Number.isFinite(date) ? { dateS: date / 1000 } : {}),
    });
  }

  onError(err: Error): void {
    clearTimeout(this.timer);
    this.reject(toBackendError(err, this.method, this.url, this.timeoutMs, this.timedOut !== null));
  }
}

function toBackendError(
  err: unknown,
  method: string,
  url: string,
  timeoutMs: number,
  timedOut: boolean,
): BackendError {
  const e = err as Error & { code?: string };
  if (
    timedOut ||
    e instanceof errors.HeadersTimeoutError ||
    e instanceof errors.BodyTimeoutError ||
    e instanceof errors.ConnectTimeoutError ||
    e.name === 'TimeoutError' ||
    e.name === 'AbortError'
  ) {
    return new BackendError('timeout', `${method} ${url}: no answer within ${timeoutMs} ms`);
  }
  return new BackendError('connect', `${method} ${url}: ${e.code ?? e.name}: ${e.message}`);
}

/** The replica's own message from an error body: vLLM nested or flat, llama.cpp, FastAPI, or text. */
export function replicaMessage(text: string): string {
  try {
    const b = JSON.parse(text) as {
      error?: { message?: unknown } | string;
      message?: unknown;
      detail?: unknown;
    };
    if (typeof b.error === 'object' && typeof b.error?.message === 'string') return b.error.message;
    if (typeof b.error === 'string') return b.error;
    if (typeof b.message === 'string') return b.message;
    if (typeof b.detail === 'string') return b.detail;
  } catch {
    // not JSON: fall through to the text itself
  }
  return text.slice(0, 300);
}
