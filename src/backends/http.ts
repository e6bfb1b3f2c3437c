import { Agent, errors, request } from 'undici';
import { BackendError } from './errors';

export interface HttpReply {
  status: number;
  text: string;
  /** The replica's clock when it answered, Unix seconds (its `Date` header, whole seconds); absent if none. */
  dateS?: number;
}

/**
 * Keep-alive HTTP to replicas: undici's Agent keeps one connection pool per origin, and every
 * call is bounded by its own timeout (connect, headers and body together).
 */
export class ReplicaHttp {
  private readonly agent: Agent;

  constructor(options: { connectionsPerReplica?: number } = {}) {
    this.agent = new Agent({
      connections: options.connectionsPerReplica ?? 8,
      keepAliveTimeout: 10_000,
      connect: { timeout: 5_000 },
    });
  }

  async call(method: 'GET' | 'POST', url: string, timeoutMs: number, body?: unknown): Promise<HttpReply> {
    // Whole milliseconds, as AbortSignal.timeout takes them: what a deadline leaves on the clock
    // has fractions (a RangeError here failed the load before any call).
    timeoutMs = Math.max(1, Math.ceil(timeoutMs));
    // Not AbortSignal.timeout: its timer fires after every call, however fast the answer, and
    // makes a DOMException with a stack: about a tenth of what the replica polls cost the plugin
    // server (docs/benchmarks.md). This one is cleared with the answer.
    const abort = new AbortController();
    const { signal } = abort;
    const timer = setTimeout(
      () => abort.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError')),
      timeoutMs,
    );
    timer.unref();
    try {
      const res = await request(url, {
        method,
        dispatcher: this.agent,
        signal,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        headers: body === undefined ? undefined : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.body.text();
      const date = Date.parse(String(res.headers.date ?? ''));
      return { status: res.statusCode, text, ...(Number.isFinite(date) ? { dateS: date / 1000 } : {}) };
    } catch (err) {
      throw toBackendError(err, method, url, timeoutMs, signal.aborted);
    } finally {
      clearTimeout(timer);
    }
  }

  close(): Promise<void> {
    return this.agent.close();
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
