/**
 * Errors a client sees, in OpenAI's format: `{"error":{"message","type","code"}}` with the
 * matching HTTP status. Retryable ones carry Retry-After seconds.
 */
export type ErrorType = 'invalid_request_error' | 'permission_error' | 'server_error' | 'requests';

export class RouterError extends Error {
  override readonly name = 'RouterError';
  constructor(
    readonly status: number,
    readonly type: ErrorType,
    readonly code: string,
    message: string,
    readonly retryAfterS?: number,
    /** For the gateway log only: may name replicas, which clients are not told about. */
    readonly internal?: string,
  ) {
    super(message);
  }

  body(): { error: { message: string; type: ErrorType; code: string } } {
    return { error: { message: this.message, type: this.type, code: this.code } };
  }

  headers(): Record<string, string> {
    const h: Record<string, string> = { 'Content-Type': 'application/json' };
    if (this.retryAfterS !== undefined) h['Retry-After'] = String(this.retryAfterS);
    return h;
  }
}

/** 405 with the `Allow` header HTTP requires. */
class MethodNotAllowed extends RouterError {
  constructor(
    method: string,
    private readonly allow: string[],
  ) {
    super(
      405,
      'invalid_request_error',
      'method_not_allowed',
      `Method ${method} is not allowed on this path; use ${allow.join(' or ')}.`,
    );
  }

  override headers(): Record<string, string> {
    return { ...super.headers(), Allow: this.allow.join(', ') };
  }
}

export const errors = {
  methodNotAllowed: (method: string, allow: string[]) => new MethodNotAllowed(method, allow),
  badRequest: (message: string, code = 'invalid_request') =>
    new RouterError(400, 'invalid_request_error', code, message),
  invalidModel: (message: string) => new RouterError(400, 'invalid_request_error', 'invalid_model', message),
  modelNotFound: (model: string) =>
    new RouterError(
      404,
      'invalid_request_error',
      'model_not_found',
      `The model \`${model}\` does not exist.`,
    ),
  forbidden: (message: string) => new RouterError(403, 'permission_error', 'forbidden', message),
  tooLarge: (limit: number) =>
    new RouterError(
      413,
      'invalid_request_error',
      'request_too_large',
      `Request body exceeds the ${limit}-byte limit.`,
    ),
  adapterRejected: (adapter: string, why: string) =>
    new RouterError(
      400,
      'invalid_request_error',
      'adapter_rejected',
      `The adapter '${adapter}' cannot be loaded: ${why}`,
    ),
  // Replica URLs are internal: the client's message omits them, `internal` (logged) keeps them.
  loadFailed: (adapter: string, replica: string, why: string) =>
    new RouterError(
      502,
      'server_error',
      'adapter_load_failed',
      `Loading adapter '${adapter}' failed: ${why}`,
      undefined,
      `load of adapter '${adapter}' on ${replica} failed: ${why}`,
    ),
  /** A name nobody has loaded, on a replica where such a name was just not found: not escalated. */
  unverifiedName: (adapter: string, replica: string, retryAfterS: number) =>
    new RouterError(
      503,
      'server_error',
      'adapter_name_cooldown',
      `No adapter slot for '${adapter}': an adapter nobody has loaded yet may not evict another one so soon. Retry later.`,
      retryAfterS,
      `no adapter slot on ${replica} for '${adapter}': an unknown name was just not found there`,
    ),
  noRoom: (
    adapter: string,
    replica: string,
    retryAfterS: number,
    why = 'every loaded adapter has requests in flight',
  ) =>
    new RouterError(
      503,
      'server_error',
      'adapter_slots_busy',
      `No adapter slot for '${adapter}': ${why}. Retry later.`,
      retryAfterS,
      `no adapter slot on ${replica} for '${adapter}': ${why}`,
    ),
  backingOff: (adapter: string, replica: string, retryAfterS: number, why: string) =>
    new RouterError(
      503,
      'server_error',
      'adapter_load_backoff',
      `Adapter '${adapter}' failed to load recently (${why}); next attempt in ${retryAfterS} s.`,
      retryAfterS,
      `adapter '${adapter}' backing off on ${replica}: ${why}`,
    ),
  /** OpenAI answers a request-rate limit with type `requests`, code `rate_limit_exceeded`. */
  coldLoadBudget: (adapter: string, scope: 'consumer' | 'fleet', retryAfterS: number) =>
    new RouterError(
      429,
      'requests',
      'rate_limit_exceeded',
      `Adapter '${adapter}' is not loaded, and ${scope === 'consumer' ? 'this consumer has' : 'the fleet has'} started its allowed adapter loads for this minute. Retry in ${retryAfterS} s, or use a loaded adapter.`,
      retryAfterS,
    ),
  noReplica: (what: string) =>
    new RouterError(503, 'server_error', 'no_replica', `No replica can serve ${what}.`, 1),
};
