import net from 'node:net';
import { Redis } from 'ioredis';
import { RedisServer } from '../../harness/redis/server';
import { TcpProxy } from '../../harness/net/tcp-proxy';
import { waitFor } from '../../harness/wait';

/** The test helper that cuts a node's link to Redis, against a real redis-server. */
describe('TcpProxy', () => {
  let redis: RedisServer;
  let proxy: TcpProxy;
  const clients: Redis[] = [];

  beforeAll(async () => {
    redis = await RedisServer.start();
  });
  afterAll(async () => {
    await redis.close();
  });
  beforeEach(async () => {
    proxy = await TcpProxy.start(redis.port);
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) c.disconnect();
    await proxy.close();
  });

  /** A client through the proxy that never retries on its own: each test sees the raw link. */
  function client(commandTimeout = 300): Redis {
    const c = new Redis({
      host: '127.0.0.1',
      port: proxy.port,
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      enableOfflineQueue: false,
      commandTimeout,
      disconnectTimeout: 100,
    });
    c.on('error', () => {});
    clients.push(c);
    return c;
  }

  test('forwards commands both ways', async () => {
    const c = client();
    await c.connect();
    await c.set('k', 'v');
    expect(await c.get('k')).toBe('v');
    expect(proxy.connections).toBe(1);
  });

  test('refuse resets open connections and closes new ones; restore lets them through', async () => {
    const c = client();
    await c.connect();
    expect(await c.ping()).toBe('PONG');
    const closed = new Promise((r) => c.once('close', r));
    proxy.cut('refuse');
    await closed;
    expect(proxy.connections).toBe(0);

    const d = client();
    await expect(d.connect()).rejects.toThrow();

    proxy.restore();
    const e = client();
    await e.connect();
    expect(await e.ping()).toBe('PONG');
  });

  test('blackhole hangs open and new connections without closing them', async () => {
    const c = client();
    await c.connect();
    proxy.cut('blackhole');
    await expect(c.ping()).rejects.toThrow(/timed out/i);
    expect(c.status).toBe('ready'); // the socket is still up: a hang, not a refusal

    // A new connection is accepted (TCP handshake done) but never forwarded: a raw PING
    // gets neither a reply nor a close.
    const raw = net.connect(proxy.port, '127.0.0.1');
    raw.on('error', () => {});
    await new Promise((r) => raw.once('connect', r));
    let answered = false;
    raw.on('data', () => (answered = true));
    raw.on('close', () => (answered = true));
    raw.write('PING\r\n');
    await new Promise((r) => setTimeout(r, 300));
    expect(answered).toBe(false);
    raw.destroy();

    // Bytes written during the blackhole are lost, not delivered on restore.
    await expect(c.set('lost', '1')).rejects.toThrow(/timed out/i);
    proxy.restore();
    const e = client();
    await e.connect();
    expect(await e.get('lost')).toBeNull();
    expect(await e.ping()).toBe('PONG');
  });

  test('delay holds every reply at least the given time, in order', async () => {
    const c = client(2000);
    await c.connect();
    proxy.delay(150);
    const t0 = Date.now();
    const replies = await Promise.all([c.incr('n'), c.incr('n'), c.incr('n')]);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(150);
    expect(replies).toEqual([1, 2, 3]);
    proxy.restore();
    expect(await c.incr('n')).toBe(4);
  });

  test("holdReplies keeps a matching reply and its link's later ones until restore; a cut drops them", async () => {
    const c = client(5000);
    const other = client(5000);
    await c.connect();
    await other.connect();
    proxy.holdReplies((chunk) => chunk.includes('held-value'));
    await c.set('h', 'held-value');
    let got: (string | null)[] | undefined;
    const read = Promise.all([c.get('h'), c.get('missing')]).then((r) => (got = r));
    await waitFor(() => proxy.heldReplies > 0, 2000, 'the reply held');
    // Another link's replies pass; the held link's later reply waits behind the first.
    expect(await other.ping()).toBe('PONG');
    expect(got).toBeUndefined();
    proxy.restore();
    await read;
    expect(got).toEqual(['held-value', null]);
    expect(proxy.heldReplies).toBe(0);

    // Held, then cut: the client sees its link reset, never the reply.
    proxy.holdReplies((chunk) => chunk.includes('held-value'));
    const lost = c.get('h');
    await waitFor(() => proxy.heldReplies > 0, 2000, 'the reply held');
    proxy.cut('refuse');
    await expect(lost).rejects.toThrow();
    expect(proxy.heldReplies).toBe(0);
  });

  test("holdRequests keeps a matching command and its link's later ones from the server until restore, a closed client's too", async () => {
    const c = client(5000);
    const other = client(5000);
    await c.connect();
    await other.connect();
    await redis.command(['DEL', 'q', 'q-n']);
    proxy.holdRequests((chunk) => chunk.includes('held-value'));
    void c.set('q', 'held-value').catch(() => {});
    await waitFor(() => proxy.heldRequests === 1, 2000, 'the command held');
    // A later one on its link waits behind it, whatever it is.
    void c.incr('q-n').catch(() => {});
    await waitFor(() => proxy.heldRequests === 2, 2000, 'the later command held');
    // Another link's commands pass; the held ones have not reached the server.
    expect(await other.ping()).toBe('PONG');
    expect(await redis.command(['GET', 'q'])).toBeNull();
    // Closed meanwhile: what it sent before its end still lands, as TCP would deliver it.
    c.disconnect();
    await waitFor(() => c.status === 'end', 2000, 'client closed');
    expect(await redis.command(['GET', 'q'])).toBeNull();
    proxy.restore();
    // The server read them before the end, then closed its side: only the other link is left.
    await waitFor(() => proxy.connections === 1, 2000, "c's link ended");
    expect(proxy.heldRequests).toBe(0);
    expect(await redis.command(['MGET', 'q', 'q-n'])).toEqual(['held-value', '1']);
  });

  test('close ends every connection', async () => {
    const c = client();
    await c.connect();
    const closed = new Promise((r) => c.once('close', r));
    await proxy.close();
    await closed;
    proxy = await TcpProxy.start(redis.port); // afterEach closes one
    await waitFor(() => c.status === 'end' || c.status === 'close', 1000, 'client closed');
  });
});
