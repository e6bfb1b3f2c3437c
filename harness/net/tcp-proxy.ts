import net from 'node:net';

/**
 * How a cut link behaves. `refuse`: open connections are reset and new ones closed at once
 * (the peer sees ECONNRESET quickly, like a crashed Redis). `blackhole`: open connections stay
 * up but nothing passes either way, new ones are accepted and never forwarded (the peer sees a
 * hang until its own timeout, like a network partition).
 */
export type CutMode = 'refuse' | 'blackhole';

interface Link {
  readonly client: net.Socket;
  readonly upstream: net.Socket;
}

/**
 * A TCP hop on loopback between a node and its Redis (or any server), that a test can cut,
 * slow down and restore. Every byte is forwarded as is; nothing is parsed.
 */
export class TcpProxy {
  private readonly links = new Set<Link>();
  /** Sockets accepted while blackholed: held open, never forwarded, closed on restore. */
  private readonly held = new Set<net.Socket>();
  private mode: CutMode | null = null;
  private delayMs = 0;
  /** Set by holdReplies(): the server's chunk that starts holding its link's replies. */
  private holdMatch: ((chunk: Buffer) => boolean) | null = null;
  /** Per link held by holdReplies(): delivers its held chunks (restore()). */
  private readonly holding = new Map<Link, () => void>();
  /** Set by holdRequests(): the client's chunk that starts holding its link's requests. */
  private requestMatch: ((chunk: Buffer) => boolean) | null = null;
  /** Per link held by holdRequests(): forwards its held chunks (restore()). */
  private readonly holdingRequests = new Map<Link, () => void>();
  /** Chunks held, per side, over every open link. */
  private readonly heldCounts = { requests: 0, replies: 0 };

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
    readonly targetPort: number,
  ) {}

  /** Listens on `listenPort` (0: a free port) on 127.0.0.1 and forwards to `targetPort`. */
  static async start(targetPort: number, listenPort = 0): Promise<TcpProxy> {
    let proxy: TcpProxy | null = null;
    const server = net.createServer((socket) => proxy?.accept(socket));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(listenPort, '127.0.0.1', () => resolve());
    });
    const { port } = server.address() as net.AddressInfo;
    proxy = new TcpProxy(server, port, targetPort);
    return proxy;
  }

  /** Open forwarded connections (held blackholed ones not counted). */
  get connections(): number {
    return this.links.size;
  }

  get cutMode(): CutMode | null {
    return this.mode;
  }

  /** Cuts the link. `refuse` resets every open connection; `blackhole` freezes them. */
  cut(mode: CutMode = 'refuse'): void {
    this.mode = mode;
    if (mode === 'refuse') {
      for (const l of this.links) this.drop(l);
    }
  }

  /** Every chunk, either way, waits `ms` before it is forwarded (0: none). */
  delay(ms: number): void {
    this.delayMs = Math.max(0, ms);
  }

  /**
   * From now on, a chunk from the server that `match` picks, and every later one on its link, is
   * held until restore(): a reply kept in flight for as long as a test needs, without a fixed
   * delay for a loaded machine to outrun. A cut drops what is held with its link.
   */
  holdReplies(match: (chunk: Buffer) => boolean): void {
    this.holdMatch = match;
  }

  /**
   * As holdReplies(), the other way: a client's chunk that `match` picks, and every later one on
   * its link, reaches the server only on restore(). A command kept on the wire lands exactly when a
   * test wants it to, however slow the machine, where a delay past a short timeout was outrun or
   * overran the client's other calls. A client that closes meanwhile is ended upstream once they
   * are forwarded, as TCP delivers what was sent before a FIN; a cut drops them with the link.
   */
  holdRequests(match: (chunk: Buffer) => boolean): void {
    this.requestMatch = match;
  }

  /** Server chunks held by holdReplies(), over every open link. */
  get heldReplies(): number {
    return this.heldCounts.replies;
  }

  /** Client chunks held by holdRequests(), over every open link. */
  get heldRequests(): number {
    return this.heldCounts.requests;
  }

  /**
   * Restores the link: new connections are forwarded again, and replies held by holdReplies()
   * are delivered. Connections that were frozen by a blackhole are reset, as a TCP connection
   * that timed out during a partition would be.
   */
  restore(): void {
    const wasBlackhole = this.mode === 'blackhole';
    this.mode = null;
    this.delayMs = 0;
    this.holdMatch = null;
    this.requestMatch = null;
    if (wasBlackhole) {
      for (const l of this.links) this.drop(l);
      for (const s of this.held) s.destroy();
      this.held.clear();
    }
    for (const deliver of [...this.holding.values()]) deliver();
    for (const forward of [...this.holdingRequests.values()]) forward();
  }

  async close(): Promise<void> {
    for (const l of this.links) this.drop(l);
    for (const s of this.held) s.destroy();
    this.held.clear();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket): void {
    client.on('error', () => {});
    if (this.mode === 'refuse') {
      client.destroy();
      return;
    }
    if (this.mode === 'blackhole') {
      this.held.add(client);
      client.on('close', () => this.held.delete(client));
      return;
    }
    const upstream = net.connect(this.targetPort, '127.0.0.1');
    upstream.on('error', () => {});
    const link: Link = { client, upstream };
    this.links.add(link);
    const sent = this.pipe(client, upstream, link, 'requests');
    this.pipe(upstream, client, link, 'replies');
    const end = (): void => this.drop(link);
    // A client that closes after sending: TCP delivers what it sent before its FIN, so a command
    // still on a delayed link runs at the server all the same; its reply goes nowhere.
    client.on('close', () => {
      if (this.mode !== null || !sent.delayed()) return end();
      // Ended, not destroyed, once written: a destroy may drop what is still in the socket's buffer.
      sent.whenDelivered(() => link.upstream.end());
    });
    upstream.on('close', end);
  }

  /**
   * Forwards `from` to `to`, one side of `link`: the client's `requests` or the server's `replies`
   * (each held by its own holdRequests() / holdReplies()). `delayed`: whether a delayed or held
   * chunk is still to be forwarded; `whenDelivered` runs its callback once none is.
   */
  private pipe(
    from: net.Socket,
    to: net.Socket,
    link: Link,
    side: 'requests' | 'replies',
  ): { delayed(): boolean; whenDelivered(f: () => void): void } {
    // Chunks keep their order when the delay changes mid-stream: none is due before the last.
    let lastDue = 0;
    let held: Buffer[] | null = null;
    let delayed = 0;
    let delivered: (() => void) | null = null;
    const holding = side === 'replies' ? this.holding : this.holdingRequests;
    const match = (): ((chunk: Buffer) => boolean) | null =>
      side === 'replies' ? this.holdMatch : this.requestMatch;
    from.on('data', (chunk: Buffer) => {
      // A blackholed link swallows bytes: they are lost as in a partition, not queued.
      if (this.mode !== null) return;
      if (held || match()?.(chunk)) {
        if (!held) {
          const mine: Buffer[] = (held = []);
          holding.set(link, () => {
            holding.delete(link);
            this.heldCounts[side] -= mine.length;
            held = null;
            for (const c of mine) if (!to.destroyed) to.write(c);
            if (delayed === 0) delivered?.();
          });
        }
        held.push(chunk);
        this.heldCounts[side]++;
        return;
      }
      const send = (): void => {
        if (this.mode === null && !to.destroyed) to.write(chunk);
      };
      const now = Date.now();
      lastDue = Math.max(lastDue, now + this.delayMs);
      if (lastDue <= now) return send();
      delayed++;
      setTimeout(() => {
        send();
        if (--delayed === 0 && held === null) delivered?.();
      }, lastDue - now);
    });
    return {
      delayed: () => delayed > 0 || held !== null,
      whenDelivered: (f) => {
        if (delayed === 0 && held === null) f();
        else delivered = f;
      },
    };
  }

  private drop(link: Link): void {
    this.links.delete(link);
    link.client.destroy();
    link.upstream.destroy();
    // What it held is lost with it: the client's socket is gone (and so is the server's, for requests).
    this.holding.get(link)?.();
    this.holdingRequests.get(link)?.();
  }
}
