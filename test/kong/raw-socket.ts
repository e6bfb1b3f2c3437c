/**
 * Bytes written to the plugin server's socket as no Kong worker would write them: several
 * messages in one write, one message over several writes, garbage. Kong's side (rpc.ts) writes
 * one message per write and waits for its reply; this one writes what it is given and collects
 * whatever comes back.
 */
import net from 'node:net';
import { Decoder, Encoder } from '@msgpack/msgpack';

/** Kong's encoding of a request (rpc.ts: nil fields left out). */
const encoder = new Encoder(undefined, undefined, undefined, undefined, false, false, true);

/** One msgpack-RPC request frame, `[0, msgid, method, [arg]]`, as Kong encodes it. */
export function request(msgid: number, method: string, arg: unknown): Buffer {
  return Buffer.from(encoder.encode([0, msgid, method, [arg]]));
}

export interface Exchange {
  /** The replies decoded from what came back, in order: `[1, msgid, error, result]`. */
  replies: unknown[][];
  /** The server closed the connection (else the exchange ended by count or time). */
  closedByServer: boolean;
}

export interface ExchangeOptions {
  /** Resolve once this many replies came back (default: wait for the server to close, or `waitMs`). */
  replies?: number;
  /** The longest the exchange waits for replies or the close (default 2 s). */
  waitMs?: number;
  /** Pause between writes, so each reaches the server as a chunk of its own (default 15 ms). */
  gapMs?: number;
  /** Half-close after the last write, as a client that sent all it had. */
  end?: boolean;
}

/** Connects, writes each of `writes` in turn, and collects what the server answers. */
export async function exchange(path: string, writes: Buffer[], o: ExchangeOptions = {}): Promise<Exchange> {
  const socket = net.connect(path);
  socket.on('error', () => {}); // a reset by the server is an outcome, read from 'close'
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  let received = Buffer.alloc(0);
  let replies: unknown[][] = [];
  let closedByServer = false;
  let finish = () => {};
  const done = new Promise<void>((r) => (finish = r));
  socket.on('data', (chunk: Buffer) => {
    received = Buffer.concat([received, chunk]);
    // Whole replies only, decoded again from the start: a partial last one waits for its rest.
    const whole: unknown[][] = [];
    try {
      for (const msg of new Decoder().decodeMulti(received)) whole.push(msg as unknown[]);
    } catch {
      // the last reply is incomplete
    }
    replies = whole;
    if (o.replies !== undefined && replies.length >= o.replies) finish();
  });
  socket.on('close', () => {
    closedByServer = true;
    finish();
  });
  const timer = setTimeout(finish, o.waitMs ?? 2000);
  for (const [i, bytes] of writes.entries()) {
    if (i > 0) await new Promise((r) => setTimeout(r, o.gapMs ?? 15));
    if (socket.destroyed) break;
    socket.write(bytes);
  }
  if (o.end) socket.end();
  await done;
  clearTimeout(timer);
  const closed = closedByServer;
  socket.destroy();
  return { replies, closedByServer: closed };
}
