/**
 * Errors a client sees, in OpenAI's format: `{"error":{"message","type","code"}}` with the
 * matching HTTP status. Retryable ones carry Retry-After seconds.
 */
export type ErrorType = 'invalid_request_error' | 'permission_error' | 'server_error';

export class RouterError extends Error {
  override readonly name = 'RouterError';
  constructor(
    readonly status: number,
    readonly type: ErrorType,
    readonly code: string,
    message: string,
    readonly retryAfterS?: number,
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
  loadFailed: (adapter: string, replica: string, why: string) =>
    new RouterError(
      502,
      'server_error',
      'adapter_load_failed',
      `Loading adapter '${adapter}' on ${replica} failed: ${why}`,
    ),
  noRoom: (adapter: string, replica: string, retryAfterS: number) =>
    new RouterError(
      503,
      'server_error',
      'adapter_slots_busy',
      `No adapter slot on ${replica} for '${adapter}': every loaded adapter has requests in flight. Retry later.`,
      retryAfterS,
    ),
  backingOff: (adapter: string, replica: string, retryAfterS: number, why: string) =>
    new RouterError(
      503,
      'server_error',
      'adapter_load_backoff',
      `Adapter '${adapter}' failed to load on ${replica} recently (${why}); next attempt in ${retryAfterS} s.`,
      retryAfterS,
    ),
  noReplica: (what: string) =>
    new RouterError(503, 'server_error', 'no_replica', `No replica can serve ${what}.`, 1),
};
