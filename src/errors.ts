/**
 * Errors a client sees, in OpenAI's format: `{"error":{"message","type","code"}}` with the
 * matching HTTP status. Retryable ones carry Retry-After seconds.
 */
export type ErrorType = 'invalid_request_error' | 'permission_error' | 'server_error' | 'requests';

interface CatalogueEntry {
  status: number;
  type: ErrorType;
  /** Answered with `Retry-After` (seconds): the client may retry the same request. */
  retryAfter: boolean;
  /** When a client gets it (docs/errors.md). */
  when: string;
}

/**
 * Every error code a client can get, from either plugin: docs/errors.md is generated from it
 * (`npm run docs`), and the factories below are the only way to build one.
 */
export const CATALOGUE = {
  invalid_request: {
    status: 400,
    type: 'invalid_request_error',
    retryAfter: false,
    when: 'An inference request with an empty body.',
  },
  invalid_json: {
    status: 400,
    type: 'invalid_request_error',
    retryAfter: false,
    when: 'The body is not a JSON object, or, for a llama.cpp replica, nested more than 1,000 levels deep.',
  },
  invalid_model: {
    status: 400,
    type: 'invalid_request_error',
    retryAfter: false,
    when: '`model` is missing, not a string, or not a valid adapter name.',
  },
  context_length_exceeded: {
    status: 400,
    type: 'invalid_request_error',
    retryAfter: false,
    when: 'The prompt (estimated from the body) plus `max_tokens` exceeds the reported context length (vLLM `max_model_len`) of every replica that could serve its model, each of which reports one: refused up front, never retried elsewhere.',
  },
  adapter_rejected: {
    status: 400,
    type: 'invalid_request_error',
    retryAfter: false,
    when: 'The replica refused to load the adapter as asked (its files are not a valid adapter).',
  },
  forbidden: {
    status: 403,
    type: 'permission_error',
    retryAfter: false,
    when: "A replica's management path (loading or unloading adapters) asked through the gateway.",
  },
  model_not_found: {
    status: 404,
    type: 'invalid_request_error',
    retryAfter: false,
    when: 'No replica has the adapter and none can load it (no path configured, or the path holds none); `GET /v1/models/{id}` for an id `/v1/models` does not list.',
  },
  adapter_loading_disabled: {
    status: 404,
    type: 'invalid_request_error',
    retryAfter: false,
    when: 'An on-demand adapter no replica holds, while `max_loaded_adapters` is 0 (the router loads no adapter): no retry can succeed until a replica holds it or the limit is raised; `/v1/models` does not offer it.',
  },
  not_found: {
    status: 404,
    type: 'invalid_request_error',
    retryAfter: false,
    when: '`lora-poller`: a path under its route that none of its `endpoints` serves.',
  },
  method_not_allowed: {
    status: 405,
    type: 'invalid_request_error',
    retryAfter: false,
    when: 'A method the path does not take (with `Allow`).',
  },
  request_too_large: {
    status: 413,
    type: 'invalid_request_error',
    retryAfter: false,
    when: "The body exceeds `max_body_bytes`, or nginx's body buffer (Kong could not hand it over).",
  },
  rate_limit_exceeded: {
    status: 429,
    type: 'requests',
    retryAfter: true,
    when: 'The request would start an adapter load past `cold_loads_per_minute` (fleet) or `cold_loads_per_consumer_per_minute`.',
  },
  router_error: {
    status: 500,
    type: 'server_error',
    retryAfter: false,
    when: 'An unexpected failure in the router (the detail is in the gateway error log).',
  },
  router_misconfigured: {
    status: 500,
    type: 'server_error',
    retryAfter: false,
    when: "A configuration Kong's schema accepted but the router cannot use (a bad regular expression...).",
  },
  adapter_load_failed: {
    status: 502,
    type: 'server_error',
    retryAfter: false,
    when: 'The replica failed the adapter load (error, timeout).',
  },
  adapter_slots_busy: {
    status: 503,
    type: 'server_error',
    retryAfter: true,
    when: 'Every adapter slot stayed busy (requests in flight) for `queue_timeout_ms`.',
  },
  adapter_name_cooldown: {
    status: 503,
    type: 'server_error',
    retryAfter: true,
    when: 'A name nobody has loaded yet would evict an adapter on a replica where such a name was just not found (`backoff_base_ms`): not waited out or sent elsewhere.',
  },
  adapter_load_backoff: {
    status: 503,
    type: 'server_error',
    retryAfter: true,
    when: 'The adapter failed to load recently where the request would load it, and no replica it could go to serves it without such a load (a name nobody has seen load, not found, is not tried elsewhere); the next attempt waits (`backoff_base_ms`).',
  },
  shed_low_priority: {
    status: 503,
    type: 'server_error',
    retryAfter: true,
    when: 'Overload: a request of a sheddable class (`slo_classes` priority < 0) that no replica is predicted to serve within its objective, while the queues are past the objective of a class above it. `Retry-After`: about how long the queues take to drain. Requests of higher classes are served meanwhile.',
  },
  ttft_overload: {
    status: 503,
    type: 'server_error',
    retryAfter: true,
    when: "Overload (`saturation_mode: predicted`, `room_wait: escalate`): a request held in the gateway because every replica was predicted past its objective (`ttft_slo_ms`, or its class's) is still so when its hold ends, `ttft_slo_ms` before `queue_timeout_ms`, while the gateway holds three times as many requests (of its class or above) as there are replicas and such late hold-ends have come for a whole hold (`queue_timeout_ms` - `ttft_slo_ms`), none a hold apart: a sustained overload, not a burst or a cold start (their first late hold-ends are sent). Sent, it would be answered past its objective behind queues that push the requests after it past theirs too. `Retry-After`: about how long the queues take to drain. `ttft_slo_ms: 0` turns holding, and this refusal, off.",
  },
  no_replica: {
    status: 503,
    type: 'server_error',
    retryAfter: true,
    when: 'No replica can serve the request (all down, or none holds a static adapter).',
  },
} as const satisfies Record<string, CatalogueEntry>;

export type ErrorCode = keyof typeof CATALOGUE;

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

/** A catalogued error; `retryAfterS` where the catalogue says the code carries Retry-After. */
function catalogued(code: ErrorCode, message: string, retryAfterS?: number, internal?: string): RouterError {
  const e = CATALOGUE[code];
  return new RouterError(e.status, e.type, code, message, retryAfterS, internal);
}

/** 405 with the `Allow` header HTTP requires. */
class MethodNotAllowed extends RouterError {
  constructor(
    method: string,
    private readonly allow: string[],
  ) {
    const e = CATALOGUE.method_not_allowed;
    super(
      e.status,
      e.type,
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
  badRequest: (
    message: string,
    code: 'invalid_request' | 'invalid_json' | 'invalid_model' = 'invalid_request',
  ) => catalogued(code, message),
  invalidModel: (message: string) => catalogued('invalid_model', message),
  /**
   * vLLM's text as `_validate_input` (vllm/entrypoints/openai/serving_engine.py) wrote it before vLLM
   * PR #22803 (v0.11.0's differs; docs/replica-apis.md, "vLLM over-long prompt"), with "about": the
   * router counts tokens by estimate, not with the model's tokenizer.
   */
  contextLengthExceeded: (maxModelLen: number, promptTokens: number, maxTokens: number | undefined) =>
    catalogued(
      'context_length_exceeded',
      maxTokens === undefined
        ? `This model's maximum context length is ${maxModelLen} tokens. However, you requested about ${promptTokens} tokens in the messages. Please reduce the length of the messages.`
        : `This model's maximum context length is ${maxModelLen} tokens. However, you requested about ${promptTokens + maxTokens} tokens (${promptTokens} in the messages, ${maxTokens} in the completion). Please reduce the length of the messages or completion.`,
    ),
  modelNotFound: (model: string) => catalogued('model_not_found', `The model \`${model}\` does not exist.`),
  /** Not a retry's matter: nothing will load it (a 404, which clients such as the openai SDK do not retry). */
  adapterLoadingDisabled: (model: string) =>
    catalogued(
      'adapter_loading_disabled',
      `The model \`${model}\` is not loaded on any replica, and this gateway loads no adapters (lora-router's max_loaded_adapters is 0): ask its operator to raise it, or use a model /v1/models lists.`,
    ),
  /** `lora-poller`: nothing it serves at this path. */
  notFound: (path: string) => catalogued('not_found', `Nothing is served at ${path}.`),
  forbidden: (message: string) => catalogued('forbidden', message),
  tooLarge: (limit: number) =>
    catalogued('request_too_large', `Request body exceeds the ${limit}-byte limit.`),
  /** Kong could not hand the body over: spooled to a file past nginx's body buffer, or never sent. */
  bodyUnreadable: () =>
    catalogued(
      'request_too_large',
      'The request body could not be read by the gateway: it is larger than the body buffer (raise nginx_http_client_body_buffer_size) or was not sent.',
    ),
  // The replica's refusal text can name storage paths: the client gets a fixed message.
  adapterRejected: (adapter: string, replica: string, told: string, why: string) =>
    catalogued(
      'adapter_rejected',
      `The adapter '${adapter}' cannot be loaded: ${told}.`,
      undefined,
      `load of adapter '${adapter}' on ${replica} refused: ${why}`,
    ),
  // Replica URLs are internal: the client's message omits them, `internal` (logged) keeps them.
  // `why` is for the client (fixed texts), `detail` for the log (the replica's own text).
  loadFailed: (adapter: string, replica: string, why: string, detail = why) =>
    catalogued(
      'adapter_load_failed',
      `Loading adapter '${adapter}' failed: ${why}`,
      undefined,
      `load of adapter '${adapter}' on ${replica} failed: ${detail}`,
    ),
  /** A name nobody has loaded, on a replica where such a name was just not found: not escalated. */
  unverifiedName: (adapter: string, replica: string, retryAfterS: number) =>
    catalogued(
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
    catalogued(
      'adapter_slots_busy',
      `No adapter slot for '${adapter}': ${why}. Retry later.`,
      retryAfterS,
      `no adapter slot on ${replica} for '${adapter}': ${why}`,
    ),
  backingOff: (adapter: string, replica: string, retryAfterS: number, why: string) =>
    catalogued(
      'adapter_load_backoff',
      `Adapter '${adapter}' failed to load recently (${why}); next attempt in ${retryAfterS} s.`,
      retryAfterS,
      `adapter '${adapter}' backing off on ${replica}: ${why}`,
    ),
  /** OpenAI answers a request-rate limit with type `requests`, code `rate_limit_exceeded`. */
  coldLoadBudget: (adapter: string, scope: 'consumer' | 'fleet', retryAfterS: number) =>
    catalogued(
      'rate_limit_exceeded',
      `Adapter '${adapter}' is not loaded, and ${scope === 'consumer' ? 'this consumer has' : 'the fleet has'} started its allowed adapter loads for this minute. Retry in ${retryAfterS} s, or use a loaded adapter.`,
      retryAfterS,
    ),
  /** Refused by class, not by capacity alone: the message names the class so a client knows a higher one fares better. */
  shedLowPriority: (sloClass: string, objectiveMs: number, predictedMs: number, retryAfterS: number) =>
    catalogued(
      'shed_low_priority',
      `The gateway is overloaded: requests of the sheddable class${sloClass ? ` '${sloClass}'` : ''} are refused first, and no replica is predicted to answer this one within its ${objectiveMs} ms objective (about ${Math.round(predictedMs)} ms). Retry in ${retryAfterS} s.`,
      retryAfterS,
    ),
  ttftOverload: (objectiveMs: number, predictedMs: number, retryAfterS: number) =>
    catalogued(
      'ttft_overload',
      `The gateway is overloaded: this request waited for a replica predicted to answer it within its ${objectiveMs} ms objective, and none is (about ${Math.round(predictedMs)} ms from its arrival). Retry in ${retryAfterS} s.`,
      retryAfterS,
    ),
  noReplica: (what: string) => catalogued('no_replica', `No replica can serve ${what}.`, 1),
  /** Anything unexpected: the detail goes to the gateway log, not to the client. */
  internal: () =>
    catalogued('router_error', 'The LoRA router failed on this request; see the gateway error log.'),
  misconfigured: (detail: string) =>
    catalogued('router_misconfigured', `lora-router configuration: ${detail}`),
};

/** docs/errors.md: every code a client can get, generated from the catalogue (`npm run docs`). */
export function errorsDoc(): string {
  const rows = Object.entries(CATALOGUE).map(
    ([code, e]) => `| \`${code}\` | ${e.status} | \`${e.type}\` | ${e.retryAfter ? 'yes' : ''} | ${e.when} |`,
  );
  return [
    '# Errors',
    '',
    '<!-- generated from src/errors.ts: npm run docs -->',
    '',
    "Every error either plugin answers a client with, in OpenAI's format",
    '`{"error":{"message","type","code"}}`. Errors from a replica itself (after the request was',
    'proxied) pass through unchanged.',
    '',
    '| code | status | type | Retry-After | when |',
    '|---|---|---|---|---|',
    ...rows,
    '',
  ].join('\n');
}
