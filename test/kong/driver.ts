/**
 * Kong's side of the external plugin-server protocol, played against the real
 * `kong-js-pluginserver` over its unix socket: what Kong's `kong/runloop/plugin_servers/`
 * does, and nothing more. Used by the plugin tests, the benchmarks and the local gateway
 * (`npm start`). See docs/kong.md for the protocol facts it encodes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Decoder, Encoder } from '@msgpack/msgpack';
import { validateRecord, type SchemaFields } from '../../src/config/kong-schema';

// ---------------------------------------------------------------------------------------
// The plugin-server process

export interface PluginServerOptions {
  /** Absolute path of the compiled plugins directory (the server `require.resolve`s it). */
  pluginsDir: string;
  sockName?: string;
  /** Receives the server's stdout and stderr (its log; Kong copies it to error.log). */
  onLog?: (line: string) => void;
  /** Extra node options (tests: --expose-gc and a heap probe). */
  nodeArgs?: string[];
}

export class PluginServerProcess {
  private constructor(
    readonly child: ChildProcess,
    readonly socketPath: string,
    private readonly prefix: string,
    readonly log: string[],
    private readonly options: PluginServerOptions,
  ) {}

  static binary(): string {
    return require.resolve('kong-pdk/bin/kong-js-pluginserver');
  }

  /** Starts the server as Kong's `pluginserver_*_start_cmd` would; resolves once it accepts connections. */
  static async start(
    o: PluginServerOptions,
    prefix = mkdtempSync(join(tmpdir(), 'kong-prefix-')),
  ): Promise<PluginServerProcess> {
    const sockName = o.sockName ?? 'lora.sock';
    const child = spawn(
      process.execPath,
      [
        ...(o.nodeArgs ?? []),
        PluginServerProcess.binary(),
        '-d',
        resolve(o.pluginsDir),
        '-p',
        prefix,
        '--sock-name',
        sockName,
      ],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const log: string[] = [];
    // Lines, not chunks: a line can straddle two chunks of a busy stream.
    const reader = () => {
      let partial = '';
      return (chunk: Buffer) => {
        const lines = (partial + chunk.toString('utf8')).split('\n');
        partial = lines.pop()!;
        for (const line of lines) {
          if (!line) continue;
          // The most recent lines (a long run logs more than is worth keeping).
          log.push(line);
          if (log.length > 10000) log.splice(0, log.length - 10000);
          o.onLog?.(line);
        }
      };
    };
    child.stdout!.on('data', reader());
    child.stderr!.on('data', reader());
    const server = new PluginServerProcess(child, join(prefix, sockName), prefix, log, o);
    await server.waitReady(15000);
    return server;
  }

  private async waitReady(ms: number): Promise<void> {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      if (this.child.exitCode !== null)
        throw new Error(`plugin server exited (${this.child.exitCode}): ${this.log.join('\n')}`);
      if (existsSync(this.socketPath) && (await canConnect(this.socketPath))) return;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(`plugin server did not listen on ${this.socketPath} within ${ms} ms`);
  }

  get exited(): boolean {
    return this.child.exitCode !== null || this.child.signalCode !== null;
  }

  /** Kills the process and starts it again on the same socket, as Kong restarts a dead plugin server. */
  async restart(): Promise<PluginServerProcess> {
    await this.kill();
    return PluginServerProcess.start(this.options, this.prefix);
  }

  /** SIGKILL, as a crash would; the socket file stays (Kong restarts the server). */
  async kill(): Promise<void> {
    await this.signal('SIGKILL');
  }

  async stop(): Promise<void> {
    await this.signal('SIGTERM');
    rmSync(this.prefix, { recursive: true, force: true });
  }

  private signal(sig: NodeJS.Signals): Promise<void> {
    if (this.exited) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 3000);
      this.child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      this.child.kill(sig);
    });
  }
}

function canConnect(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(path);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

// ---------------------------------------------------------------------------------------
// MessagePack RPC: [0, msgid, method, [args]] -> [1, msgid, error, result]

export class RpcError extends Error {
  override readonly name = 'RpcError';
}

/** One connection. Like Kong, it waits for each reply before sending the next request. */
export class RpcConnection {
  // ignoreUndefined: a nil answer is sent without its key, as Kong does.
  private readonly encoder = new Encoder(undefined, undefined, undefined, undefined, false, false, true);
  private buffer: Buffer = Buffer.alloc(0);
  private waiting: { msgid: number; resolve: (v: unknown) => void; reject: (e: Error) => void } | null = null;
  private nextId = 0;
  private closed = false;

  private constructor(private readonly socket: net.Socket) {
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    const fail = (err: Error) => {
      this.closed = true;
      const w = this.waiting;
      this.waiting = null;
      w?.reject(err);
    };
    socket.on('error', fail);
    socket.on('close', () => fail(new RpcError('connection closed by the plugin server')));
  }

  static connect(path: string, timeoutMs = 5000): Promise<RpcConnection> {
    return new Promise((resolve, reject) => {
      const s = net.connect(path);
      const timer = setTimeout(() => {
        s.destroy();
        reject(new RpcError(`connect to ${path} timed out`));
      }, timeoutMs);
      s.once('connect', () => {
        clearTimeout(timer);
        resolve(new RpcConnection(s));
      });
      s.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
  }

  get usable(): boolean {
    return !this.closed && this.waiting === null;
  }

  call(method: string, arg: unknown, timeoutMs = 30000): Promise<unknown> {
    if (this.closed) return Promise.reject(new RpcError('connection is closed'));
    if (this.waiting) return Promise.reject(new RpcError('a call is already waiting on this connection'));
    const msgid = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting = null;
        this.close();
        reject(new RpcError(`${method} got no reply within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiting = {
        msgid,
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      // One message per write: the server decodes one message per chunk.
      this.socket.write(this.encoder.encode([0, msgid, method, [arg]]));
    });
  }

  close(): void {
    this.closed = true;
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    this.buffer = this.buffer.length ? Buffer.concat([this.buffer, chunk]) : chunk;
    let msg: unknown;
    try {
      msg = new Decoder().decode(this.buffer);
    } catch (err) {
      if ((err as Error).message.includes('Insufficient data')) return;
      this.waiting?.reject(err as Error);
      this.waiting = null;
      return;
    }
    this.buffer = Buffer.alloc(0);
    const [type, msgid, error, result] = msg as [number, number, unknown, unknown];
    const w = this.waiting;
    if (type !== 1 || !w || w.msgid !== msgid) return;
    this.waiting = null;
    if (error !== null && error !== undefined) w.reject(new RpcError(String(error)));
    else w.resolve(result);
  }
}

// ---------------------------------------------------------------------------------------
// Kong's PDK, for one request

export interface RequestInit {
  method?: string;
  path: string;
  headers?: Record<string, string>;
  body?: Buffer | null;
  /**
   * Emulates `nginx_http_client_body_buffer_size`: a larger body is spooled to a file and
   * `kong.request.get_raw_body()` returns nil.
   */
  bodyBufferBytes?: number;
}

export interface ExitResponse {
  status: number;
  body: Buffer;
  headers: Record<string, string>;
}

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
  target?: { host: string; port: number };
  /** ngx.ctx.authenticated_consumer, set by an authentication plugin (a `before` hook here). */
  consumer?: { id: string; username?: string };
  serviceBody?: string;
  exit?: ExitResponse;
  /** The status the log phase sees: the upstream's, or the exit's. */
  status?: number;
  /** The phase being run (kong.log.serialize is log-only). */
  phase = 'access';

  constructor(init: RequestInit) {
    this.method = init.method ?? 'POST';
    this.path = init.path;
    this.headers = Object.fromEntries(
      Object.entries(init.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]),
    );
    this.body = init.body ?? null;
    this.bodyBufferBytes = init.bodyBufferBytes ?? 10 * 1024 * 1024;
    if (this.body && this.headers['content-length'] === undefined)
      this.headers['content-length'] = String(this.body.length);
  }

  /**
   * Runs one PDK method as Kong would. Returns `{ value }` (undefined = nil, sent without
   * Data), or `{ error }` for a call Kong would fail.
   */
  pdk(method: string, args: unknown[]): { value?: unknown; error?: string } {
    (this.pdkCalls[this.phase] ??= []).push(method);
    const [a0, a1, a2] = args;
    switch (method) {
      case 'kong.request.get_path':
        return { value: this.path.split('?')[0] };
      case 'kong.request.get_method':
        return { value: this.method };
      case 'kong.request.get_header':
        return { value: this.headers[String(a0).toLowerCase()] };
      case 'kong.request.get_headers':
        return { value: { ...this.headers } };
      case 'kong.client.get_consumer':
        // Kong/kong kong/pdk/client.lua (3.x): returns ngx.ctx.authenticated_consumer, nil if none.
        return { value: this.consumer };
      case 'kong.request.get_raw_body':
        if (this.body === null) return { value: '' };
        // Spooled to a file: Kong returns nil, err and only the first value reaches JS.
        if (this.body.length > this.bodyBufferBytes) return { value: undefined };
        return { value: this.body };
      case 'kong.service.set_target':
        if (typeof a0 !== 'string' || typeof a1 !== 'number' || !Number.isInteger(a1)) {
          return { error: 'port must be an integer' };
        }
        this.target = { host: a0, port: a1 };
        return { value: undefined };
      case 'kong.service.request.set_raw_body':
        if (typeof a0 !== 'string' && !(a0 instanceof Uint8Array)) return { error: 'body must be a string' };
        this.serviceBody = typeof a0 === 'string' ? a0 : Buffer.from(a0).toString('utf8');
        return { value: undefined };
      case 'kong.ctx.shared.get':
        return { value: this.ctxShared.get(String(a0)) };
      case 'kong.ctx.shared.set':
        this.ctxShared.set(String(a0), a1);
        return { value: undefined };
      case 'kong.response.set_header':
        this.responseHeaders[String(a0)] = String(a1);
        return { value: undefined };
      case 'kong.response.get_status':
        return { value: this.status ?? 200 };
      case 'kong.response.exit': {
        const body =
          a1 === undefined || a1 === null
            ? Buffer.alloc(0)
            : typeof a1 === 'string'
              ? Buffer.from(a1)
              : Buffer.from(a1 as Uint8Array);
        this.exit = { status: Number(a0), body, headers: { ...(a2 as Record<string, string> | undefined) } };
        this.status = Number(a0);
        return { value: undefined };
      }
      case 'kong.log.serialize':
        if (this.phase !== 'log') return { error: 'function cannot be called in access phase' };
        return {
          value: JSON.stringify({
            request: { uri: this.path, headers: this.headers },
            response: { status: this.status },
          }),
        };
    }
    if (/^kong\.log\.(alert|crit|err|warn|notice|info|debug)$/.test(method)) {
      this.logs.push({ level: method.slice('kong.log.'.length), args });
      return { value: undefined };
    }
    return { error: `PDK method ${method} is not available (driver)` };
  }
}

// ---------------------------------------------------------------------------------------
// Kong's calls

export interface PluginInfo {
  Name: string;
  Version: string;
  Priority: number;
  Phases: string[];
  Schema: { name: string; fields: [{ config: { type: 'record'; fields: SchemaFields } }] };
}

export interface InstanceInfo {
  Name: string;
  Id: number;
  Config: Record<string, unknown>;
  StartTime: number;
}

/** Kong's own keys in the config it sends to StartInstance. */
export interface KongKeys {
  route_id?: string | null;
  service_id?: string | null;
  consumer_id?: string | null;
  __plugin_id?: string;
  __seq__?: number;
  __key__?: string;
  __ws_id?: string;
}

export class KongDriver {
  private idle: RpcConnection[] = [];
  private infos = new Map<string, PluginInfo>();
  private seq = 0;

  constructor(readonly socketPath: string) {}

  private async connection(): Promise<RpcConnection> {
    for (;;) {
      const c = this.idle.pop();
      if (!c) return RpcConnection.connect(this.socketPath);
      if (c.usable) return c;
    }
  }

  /** One RPC on a pooled connection (a fresh one when all are busy, as Kong's cosockets do). */
  async call(method: string, arg: unknown): Promise<unknown> {
    const c = await this.connection();
    try {
      return await c.call(method, arg);
    } finally {
      if (c.usable) this.idle.push(c);
    }
  }

  async pluginInfo(name: string): Promise<PluginInfo> {
    let info = this.infos.get(name);
    if (!info) {
      info = (await this.call('plugin.GetPluginInfo', name)) as PluginInfo;
      this.infos.set(name, info);
    }
    return info;
  }

  /**
   * Validates `config` against the plugin's exported schema as Kong does (defaults filled,
   * errors keyed by field; throws ConfigError), then starts an instance with Kong's keys.
   */
  async startInstance(
    name: string,
    config: Record<string, unknown>,
    keys: KongKeys = {},
  ): Promise<InstanceInfo> {
    const info = await this.pluginInfo(name);
    const fields = info.Schema.fields[0].config.fields;
    const validated = validateRecord(fields, config);
    // Kong sends unset optional fields as null (ngx.null), not absent.
    for (const entry of fields)
      for (const k of Object.keys(entry)) if (!(k in validated)) validated[k] = null;
    const seq = this.seq++;
    const full = {
      ...validated,
      route_id: null,
      service_id: null,
      consumer_id: null,
      __plugin_id: `00000000-0000-4000-8000-${String(seq).padStart(12, '0')}`,
      __seq__: seq,
      __key__: `plugins:${name}:::::${seq}`,
      __ws_id: '0dc6f45b-8f8d-40d2-a504-473544ee190b',
      ...keys,
    };
    return (await this.call('plugin.StartInstance', {
      Name: name,
      Config: JSON.stringify(full),
    })) as InstanceInfo;
  }

  async closeInstance(id: number): Promise<unknown> {
    return this.call('plugin.CloseInstance', id);
  }

  /**
   * Runs one phase of one instance for `req`: HandleEvent, then a Step per PDK call until
   * "ret". After `kong.response.exit` Kong sends nothing more for the event.
   */
  async handleEvent(instanceId: number, phase: string, req: KongRequest): Promise<void> {
    req.phase = phase;
    const c = await this.connection();
    let reusable = true;
    try {
      let reply = (await c.call('plugin.HandleEvent', { InstanceId: instanceId, EventName: phase })) as {
        EventId: number;
        Data: 'ret' | { Method: string; Args?: unknown[] };
      };
      for (;;) {
        if (reply.Data === 'ret') return;
        const { Method, Args } = reply.Data;
        const r = req.pdk(Method, Args ?? []);
        if (Method === 'kong.response.exit') return;
        const step =
          r.error !== undefined
            ? c.call('plugin.StepError', { EventId: reply.EventId, Data: r.error })
            : c.call(
                'plugin.Step',
                r.value === undefined
                  ? { EventId: reply.EventId }
                  : { EventId: reply.EventId, Data: r.value },
              );
        reply = (await step) as typeof reply;
      }
    } catch (err) {
      reusable = false;
      throw err;
    } finally {
      if (reusable && c.usable) this.idle.push(c);
      else c.close();
    }
  }

  close(): void {
    for (const c of this.idle) c.close();
    this.idle = [];
  }
}
