/**
 * Kong's MessagePack RPC to a plugin server: `[0, msgid, method, [args]]` answered by
 * `[1, msgid, error, result]` (Kong/kong 3.9.3 `kong/runloop/plugin_servers/rpc/mp_rpc.lua`
 * `Rpc:call`; 3.8.1 `kong/runloop/plugin_servers/mp_rpc.lua`).
 */
import net from 'node:net';
import { Decoder, Encoder } from '@msgpack/msgpack';
// Every reply is bounded by Kong's cosocket read timeout: `Rpc:call` (mp_rpc.lua 3.9.3) sets none,
// nor does Kong's config, so lua-nginx-module's `lua_socket_read_timeout` default (60 s) applies.
import { KONG_RPC_TIMEOUT_MS } from '../../src/config/parse';

export class RpcError extends Error {
  override readonly name = 'RpcError';
}

/** One connection. Like Kong, it waits for each reply before sending the next request. */
export class RpcConnection {
  // ignoreUndefined: a nil answer is sent without its key, as Kong's `Data = step_res` (mp_rpc.lua 3.9.3
  // `bridge_loop`) does.
  private readonly encoder = new Encoder(undefined, undefined, undefined, undefined, false, false, true);
  private readonly decoder = new Decoder();
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

  // The 5 s connect timeout is the driver's (Kong's is lua-nginx-module's default, 60 s).
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

  call(method: string, arg: unknown, timeoutMs = KONG_RPC_TIMEOUT_MS): Promise<unknown> {
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
      msg = this.decoder.decode(this.buffer);
    } catch (err) {
      if ((err as Error).message.includes('Insufficient data')) return;
      this.waiting?.reject(err as Error);
      this.waiting = null;
      return;
    }
    this.buffer = Buffer.alloc(0);
    const [type, msgid, error, result] = msg as [number, number, unknown, unknown];
    const w = this.waiting;
    // Kong (mp_rpc.lua 3.9.3 `Rpc:call`) handles [2, label, args] notifications (serverPid) and
    // asserts the msgid; kong-pdk 0.6.0 sends no notification, so the driver drops anything else.
    if (type !== 1 || !w || w.msgid !== msgid) return;
    this.waiting = null;
    if (error !== null && error !== undefined) w.reject(new RpcError(String(error)));
    else w.resolve(result);
  }
}
