/**
 * Reading Kong's connections as a msgpack-RPC peer must: the byte stream is cut into messages
 * wherever writes split or join them, and bytes that are no request close their connection,
 * never the process (it serves every plugin for every Kong worker of the node, and Kong
 * restarts it empty: docs/kong.md, "When the plugin server is down").
 *
 * This replaces the per-connection handler of kong-pdk 0.6.0's listener (listener.js `serve`;
 * its socket set-up, unlink, listen and "server started" line, still runs). That handler is a
 * closure inside `serve`, so it cannot be wrapped, and it cannot be kept:
 * - it decodes each chunk as exactly one message. Two messages in one write throw
 *   "Extra N of M byte(s)" out of the 'data' handler, an uncaught exception that ends the
 *   process; so does any stray byte after a message (curl's `GET / HTTP/1.1`: 'G' is a
 *   positive fixint), and a message whose end shares a chunk with the next one's start.
 * - it destructures and `split`s whatever it decoded: a number, or a method that is not a
 *   string, throws there too.
 * - it calls any method of the Server object a peer names (`plugin.loadPlugins`,
 *   `plugin.close`), not only the RPC methods.
 * - it waits for as many bytes as a length header announces (4 GiB), and joins all chunks again
 *   for every chunk of a long message.
 * The dispatch is otherwise kong-pdk's: the same error texts, replies in the order calls end.
 */
import type { Server as NetServer, Socket } from 'node:net';
import { Decoder, Encoder } from '@msgpack/msgpack';
import { routerSchema } from '../src/config/router-schema';
import type { KongPdkServer } from './events';
import { scanValue } from './frames';

/**
 * The largest message accepted: a Step carrying a request body, which lora-router reads up to
 * `max_body_bytes` (the Schema's bound: 1 GiB), plus room for the rest of the message. A length
 * announced past it closes the connection before anything is buffered.
 */
export const MAX_MESSAGE_BYTES =
  (routerSchema.find((f) => 'max_body_bytes' in f)?.max_body_bytes?.between?.[1] ?? 2 ** 30) + 2 ** 20;

/**
 * kong-pdk 0.6.0's RPC methods (server.js: those marked "RPC method", and the Step<Entity>
 * aliases it generates); Kong calls StartInstance, CloseInstance, HandleEvent and the Steps
 * (Kong/kong 3.9.3 kong/runloop/plugin_servers/rpc/mp_rpc.lua).
 */
export const RPC_METHODS = new Set([
  'GetStatus',
  'GetPluginInfo',
  'SetPluginDir',
  'StartInstance',
  'InstanceStatus',
  'CloseInstance',
  'HandleEvent',
  'Step',
  'StepError',
  'StepMultiMap',
  ...['Service', 'Consumer', 'Route', 'Plugin', 'Credential', 'MemoryStats'].map((e) => `Step${e}`),
]);

/** The parts of kong-pdk's logger (node-color-log) the dispatch uses, as listener.js does. */
export interface PdkLogger {
  debug(...args: unknown[]): void;
  error(...args: unknown[]): void;
}

/**
 * At most `perWindow` lines each `windowMs`; the count of lines held back is written when the
 * window ends. A peer sending garbage in a loop must not fill Kong's error log.
 */
export class RateLimitedLog {
  private windowStart = -Infinity;
  private written = 0;
  private held = 0;
  private flush: NodeJS.Timeout | undefined;

  constructor(
    private readonly write: (line: string) => void,
    private readonly perWindow = 5,
    private readonly windowMs = 60_000,
  ) {}

  log(line: string): void {
    const now = Date.now();
    if (now - this.windowStart >= this.windowMs) {
      this.report();
      this.windowStart = now;
      this.written = 0;
    }
    if (this.written < this.perWindow) {
      this.written++;
      this.write(line);
      return;
    }
    this.held++;
    if (!this.flush) {
      this.flush = setTimeout(() => this.report(), this.windowStart + this.windowMs - now);
      this.flush.unref();
    }
  }

  private report(): void {
    clearTimeout(this.flush);
    this.flush = undefined;
    if (this.held > 0)
      this.write(
        `${LOG_PREFIX} ${this.held} more warnings of the socket in ${this.windowMs / 1000} s not logged`,
      );
    this.held = 0;
  }
}

const LOG_PREFIX = '[kong-lora-pluginserver] warn:';

/** The first bytes of a message, readable in a log line (curl's request shows as such). */
function preview(bytes: Uint8Array): string {
  const shown = Buffer.from(bytes.subarray(0, 48)).toString('latin1');
  const escaped = JSON.stringify(shown).slice(1, -1);
  return `"${escaped}"${bytes.length > 48 ? ` (${bytes.length} bytes)` : ''}`;
}

type Request = [0, number, string, unknown[]];

/** `[0, msgid, method, [args]]`, msgid a uint32 (the msgpack-RPC spec). */
function isRequest(msg: unknown): msg is Request {
  return (
    Array.isArray(msg) &&
    msg.length === 4 &&
    msg[0] === 0 &&
    Number.isInteger(msg[1]) &&
    (msg[1] as number) >= 0 &&
    (msg[1] as number) <= 0xffffffff &&
    typeof msg[2] === 'string' &&
    Array.isArray(msg[3])
  );
}

/** The error text of a reply, as kong-pdk's listener.js `errToString` makes it. */
function errorText(err: unknown): string {
  if (typeof err === 'string') return err;
  if (typeof err === 'object' && err !== null && 'message' in err) return String(err.message);
  return String(err);
}

/** One Kong connection: its bytes cut into messages, each dispatched to kong-pdk's Server. */
class Connection {
  private readonly encoder = new Encoder();
  private readonly decoder = new Decoder();
  private chunks: Buffer[] = [];
  private buffered = 0;
  /** Bytes the message under way needs before it is worth scanning again. */
  private need = 1;

  constructor(
    private readonly socket: Socket,
    private readonly server: KongPdkServer,
    private readonly logger: PdkLogger,
    private readonly warn: RateLimitedLog,
  ) {}

  onData(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    if (this.buffered < this.need) return;
    const buf = this.chunks.length === 1 ? chunk : Buffer.concat(this.chunks, this.buffered);
    let start = 0;
    while (start < buf.length && !this.socket.destroyed) {
      const scan = scanValue(buf, start, MAX_MESSAGE_BYTES);
      if (scan.kind === 'invalid') return this.close(scan.reason, buf.subarray(start));
      if (scan.kind === 'partial') {
        this.chunks = [buf.subarray(start)];
        this.buffered = buf.length - start;
        this.need = scan.need;
        return;
      }
      const refused = this.dispatch(buf.subarray(start, scan.end));
      if (refused !== undefined) return this.close(refused, buf.subarray(start));
      start = scan.end;
    }
    this.chunks = [];
    this.buffered = 0;
    this.need = 1;
  }

  /** Answers one message, or says why it closes the connection. */
  private dispatch(bytes: Buffer): string | undefined {
    let msg: unknown;
    try {
      msg = this.decoder.decode(bytes);
    } catch (err) {
      return `undecodable message (${errorText(err)})`;
    }
    if (!isRequest(msg)) return 'not a msgpack-RPC request';
    const [, msgid, method, args] = msg;
    const dot = method.indexOf('.');
    const ns = dot < 0 ? method : method.slice(0, dot);
    const cmd = dot < 0 ? '' : method.slice(dot + 1);
    if (ns !== 'plugin') {
      this.reply(msgid, `RPC for ${ns} is not supported`);
      return undefined;
    }
    if (!RPC_METHODS.has(cmd)) {
      this.warn.log(`${LOG_PREFIX} rpc #${msgid}: method ${JSON.stringify(cmd)} not implemented`);
      this.reply(msgid, `method ${cmd} not implemented`);
      return undefined;
    }
    // kong-pdk also wrote the args as JSON here, at every level: a request body each time.
    this.logger.debug(`rpc: #${msgid} method: ${method}`);
    let call: Promise<unknown>;
    try {
      call = Promise.resolve((this.server[cmd] as (...a: unknown[]) => unknown).apply(this.server, args));
    } catch (err) {
      call = Promise.reject(err as Error);
    }
    call.then(
      (result) => this.reply(msgid, undefined, result),
      (err: unknown) => {
        this.logger.error(`rpc: # ${msgid} ${String(err)}`);
        this.reply(msgid, errorText(err));
      },
    );
    return undefined;
  }

  /** `[1, msgid, error, result]`; a result msgpack cannot carry is answered as an error. */
  private reply(msgid: number, error: string | undefined, result?: unknown): void {
    if (!this.socket.writable) return; // the peer went away first
    let bytes: Uint8Array;
    try {
      bytes = this.encoder.encode([1, msgid, error, result]);
    } catch (err) {
      bytes = this.encoder.encode([1, msgid, `unencodable result: ${errorText(err)}`, undefined]);
    }
    this.socket.write(bytes);
  }

  private close(reason: string, bytes: Uint8Array): void {
    this.warn.log(`${LOG_PREFIX} closed a connection to its socket: ${reason}: ${preview(bytes)}`);
    this.socket.destroy();
  }
}

/**
 * Takes over each connection of kong-pdk's listener: removes the 'data' handler its `serve`
 * attached (listener.js: the only one) and reads the socket with a Connection instead.
 */
export function serveConnections(
  listener: NetServer,
  server: KongPdkServer,
  logger: PdkLogger,
  warn = new RateLimitedLog((line) => console.error(line)),
): void {
  listener.on('connection', (socket: Socket) => {
    socket.removeAllListeners('data');
    const connection = new Connection(socket, server, logger, warn);
    socket.on('data', (chunk: Buffer) => connection.onData(chunk));
  });
}
