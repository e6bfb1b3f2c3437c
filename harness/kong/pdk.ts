/**
 * Kong's PDK as an external plugin sees it, for one request: what `call_pdk_method` in
 * Kong/kong 3.9.3 `kong/runloop/plugin_servers/rpc/mp_rpc.lua` (3.8.1: `mp_rpc.lua`) does
 * with each call, and what the called Lua function returns or raises.
 */

export interface RequestInit {
  method?: string;
  path: string;
  headers?: Record<string, string>;
  body?: Buffer | null;
  /**
   * Emulates `nginx_http_client_body_buffer_size`: a larger body is spooled to a file, which
   * `kong.request.get_raw_body()` reads only when given `max_allowed_file_size` (Kong >= 3.8.0).
   * Kong's default is 8k (kong.conf.default, templates/kong_defaults.lua, 3.9.3 and 3.8.1); the
   * driver's default is 10 MiB on purpose, as docker/kong.conf sets `10m`.
   */
  bodyBufferBytes?: number;
}

export interface ExitResponse {
  status: number;
  body: Buffer;
  headers: Record<string, string>;
}

/** What Kong does with one PDK call: a value (undefined = nil, sent without Data), or a Lua error. */
export type PdkResult = { value?: unknown; raise?: undefined } | { raise: string };

/**
 * Kong's answer when a plugin raises in access (Kong/kong 3.9.3 `kong/init.lua`
 * `execute_collecting_plugins_iterator`, then `kong.response.error`, kong/pdk/response.lua). Kong's
 * JSON template also carries `"request_id"` (kong/tools/http.lua, 3.9.3); the driver leaves it out.
 */
const UNEXPECTED_ERROR: ExitResponse = {
  status: 500,
  body: Buffer.from('{"message":"An unexpected error occurred"}'),
  headers: { 'Content-Type': 'application/json; charset=utf-8' },
};

/** What one request holds on Kong's side while plugins run: ngx.ctx, the target, the response. */
export class KongRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body: Buffer | null;
  readonly bodyBufferBytes: number;
  readonly ctxShared = new Map<string, unknown>();
  readonly responseHeaders: Record<string, string> = {};
  readonly logs: { level: string; args: unknown[] }[] = [];
  /** PDK calls made by plugins, by phase. */
  readonly pdkCalls: Record<string, string[]> = {};
  /** Lua errors a PDK call raised (Kong logged them and answered 500). */
  readonly luaErrors: string[] = [];
  target?: { host: string; port: number };
  /** ngx.ctx.authenticated_consumer, set by an authentication plugin (a `before` hook here). */
  consumer?: { id: string; username?: string };
  /** `kong.service.request.set_scheme`; else the service's protocol. */
  scheme?: 'http' | 'https';
  serviceBody?: string;
  exit?: ExitResponse;
  /** The status the log phase sees: the upstream's, or the exit's. */
  status?: number;
  /**
   * Kong itself answered after a failed proxy attempt (nginx's 502/504 through
   * `/kong_error_handler`, which sets `ctx.KONG_UNEXPECTED`: Kong/kong 3.9.3 kong/init.lua
   * `Kong.handle_error`).
   */
  unexpected = false;
  /** The phase being run (kong.log.serialize is log-only). */
  phase = 'access';

  constructor(init: RequestInit) {
    this.method = init.method ?? 'POST';
    this.path = init.path;
    this.headers = Object.fromEntries(
      Object.entries(init.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]),
    );
    this.body = init.body ?? null;
    // 10 MiB, not Kong's 8k: deliberate, matching docker/kong.conf (see RequestInit.bodyBufferBytes).
    this.bodyBufferBytes = init.bodyBufferBytes ?? 10 * 1024 * 1024;
    if (this.body && this.headers['content-length'] === undefined)
      this.headers['content-length'] = String(this.body.length);
  }

  /** Ends the request as Kong's delayed response does after a plugin raised. */
  raised(message: string): void {
    this.luaErrors.push(message);
    this.exit = UNEXPECTED_ERROR;
    this.status = 500;
  }

  /** Runs one PDK method as Kong would. */
  pdk(method: string, args: unknown[]): PdkResult {
    (this.pdkCalls[this.phase] ??= []).push(method);
    const [a0, a1, a2] = args;
    switch (method) {
      case 'kong.request.get_path':
        // kong/pdk/request.lua (3.9.3) `get_path`: `get_raw_path` (request_uri up to "?"), normalized
        // (RFC 3986; the driver skips normalization).
        return { value: this.path.split('?')[0] };
      case 'kong.request.get_method':
        // kong/pdk/request.lua (3.9.3) `get_method`: ngx.req.get_method().
        return { value: this.method };
      case 'kong.request.get_header':
        // kong/pdk/request.lua (3.9.3) `get_header` via kong/tools/http.lua `get_header`: names are
        // case-insensitive, first value of a repeated header ("_" for "-" is not emulated).
        return { value: this.headers[String(a0).toLowerCase()] };
      case 'kong.request.get_headers':
        // Kong (mp_rpc.lua 3.9.3 `fix_mmap`) sends each string value as a one-element array; the
        // driver sends plain strings.
        return { value: { ...this.headers } };
      case 'kong.client.get_consumer':
        // kong/pdk/client.lua (3.9.3, 3.8.1) `get_consumer`: ngx.ctx.authenticated_consumer, nil if none.
        return { value: this.consumer };
      case 'kong.request.get_raw_body':
        return rawBody(this.body, this.bodyBufferBytes, a0);
      case 'kong.service.set_target':
        // kong/pdk/service.lua (3.9.3) `set_target`: raises on a bad host or port.
        if (typeof a0 !== 'string') return { raise: 'host must be a string' };
        if (typeof a1 !== 'number' || !Number.isInteger(a1)) return { raise: 'port must be an integer' };
        if (a1 < 0 || a1 > 65535)
          return { raise: `port must be an integer between 0 and 65535: given ${a1}` };
        this.target = { host: a0, port: a1 };
        return { value: undefined };
      case 'kong.service.request.set_scheme':
        // kong/pdk/service/request.lua (3.9.3) `set_scheme`.
        if (a0 !== 'http' && a0 !== 'https') return { raise: `invalid scheme: ${String(a0)}` };
        this.scheme = a0;
        return { value: undefined };
      case 'kong.service.request.set_raw_body':
        // kong/pdk/service/request.lua (3.9.3): a string (msgpack bin arrives as one), else raises.
        if (typeof a0 !== 'string' && !(a0 instanceof Uint8Array)) return { raise: 'body must be a string' };
        this.serviceBody = typeof a0 === 'string' ? a0 : Buffer.from(a0).toString('utf8');
        return { value: undefined };
      case 'kong.ctx.shared.get':
        // runloop/plugin_servers/plugin.lua (3.9.3) `exposed_api`: kong.ctx.shared (saved for the log timer).
        return { value: this.ctxShared.get(String(a0)) };
      case 'kong.ctx.shared.set':
        this.ctxShared.set(String(a0), a1);
        return { value: undefined };
      case 'kong.response.set_header':
        // kong/pdk/response.lua (3.9.3) `set_header` raises on a non-string name, a value not a
        // string/number/boolean/string array (pdk/private/checks.lua `validate_header`), or once
        // headers are sent; the driver checks nothing (the plugins pass strings).
        this.responseHeaders[String(a0)] = String(a1);
        return { value: undefined };
      case 'kong.response.get_status':
        // kong/pdk/response.lua (3.9.3) `get_status`: ngx.status, allowed from header_filter on (in
        // access it raises); in the log timer, the saved `ngx.status` (plugin.lua `exposed_api`).
        // The 200 when no status is set is the driver's own default (an upstream's 200).
        return { value: this.status ?? 200 };
      case 'kong.response.get_source':
        // kong/pdk/response.lua (3.9.3) `get_source`: "error" when KONG_UNEXPECTED, "exit" when
        // KONG_EXITED, "service" when KONG_PROXIED; in the log timer from the saved ngx.ctx
        // (plugin.lua `exposed_api`).
        return { value: this.unexpected ? 'error' : this.exit ? 'exit' : 'service' };
      case 'kong.response.exit':
        return this.exitCall(a0, a1, a2);
      case 'kong.log.serialize':
        // kong/pdk/log.lua (3.9.3) `serialize`: `check_phase(PHASES_LOG)` raises elsewhere ("function
        // cannot be called in <phase> phase (only in: log)"; the driver's message is shorter);
        // plugin.lua `exposed_api` (3.9.3) returns it cjson-encoded.
        if (this.phase !== 'log') return { raise: 'function cannot be called in access phase' };
        return {
          value: JSON.stringify({
            request: { uri: this.path, headers: this.headers },
            response: { status: this.status },
          }),
        };
    }
    // kong/pdk/log.lua (3.9.3): the level functions log and return nothing.
    if (/^kong\.log\.(alert|crit|err|warn|notice|info|debug)$/.test(method)) {
      this.logs.push({ level: method.slice('kong.log.'.length), args });
      return { value: undefined };
    }
    // mp_rpc.lua (3.9.3) `call_pdk_method`: an unknown method is logged and answered with nil.
    this.logs.push({ level: 'err', args: [`could not find pdk method: ${method}`] });
    return { value: undefined };
  }

  /** kong/pdk/response.lua (3.9.3) `exit`: argument checks raise; a table body is JSON. */
  private exitCall(status: unknown, body: unknown, headers: unknown): PdkResult {
    if (typeof status !== 'number') return { raise: 'code must be a number' };
    if (status < 100 || status > 599) return { raise: 'code must be a number between 100 and 599' };
    if (headers !== undefined && headers !== null && typeof headers !== 'object')
      return { raise: 'headers must be a nil or table' };
    let b: Buffer;
    if (body === undefined || body === null) b = Buffer.alloc(0);
    else if (typeof body === 'string') b = Buffer.from(body);
    else if (body instanceof Uint8Array) b = Buffer.from(body);
    else if (typeof body === 'object') b = Buffer.from(JSON.stringify(body));
    else return { raise: 'body must be a nil, string or table' };
    this.exit = { status, body: b, headers: { ...(headers as Record<string, string> | undefined) } };
    this.status = status;
    return { value: undefined };
  }
}

/**
 * `kong.request.get_raw_body(max_allowed_file_size)` (Kong/kong 3.9.3 and 3.8.1
 * `kong/pdk/request.lua`; the argument exists since 3.8.0), then mp_rpc.lua's `fix_raw`,
 * which packs the result as msgpack bin: no body is "" (bin 0); a body spooled past
 * `client_body_buffer_size` is read from its file only when a max is given (0 = no limit) and
 * the file is not larger; otherwise the result is nil, and packing nil as bin raises a Lua error.
 */
function rawBody(body: Buffer | null, bufferBytes: number, max: unknown): PdkResult {
  if (body === null) return { value: Buffer.alloc(0) };
  if (body.length <= bufferBytes) return { value: body };
  const limit = typeof max === 'number' ? max : undefined;
  if (limit === undefined || limit < 0 || (limit > 0 && body.length > limit))
    return { raise: "bad argument #1 to 'binary' (fix_raw: get_raw_body returned nil)" };
  return { value: body };
}
