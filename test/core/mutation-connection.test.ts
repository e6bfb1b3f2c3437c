/**
 * The Redis link of a RedisFleetStore (src/fleet/redis/connection.ts), alone: the ioredis options
 * (bounded calls, no offline queue, the reconnect backoff), the reconnect after an `end` ioredis
 * gives up on, and RedisConnection against a real redis-server: a changed server said once per
 * look as ServerSwitched until the probe's `ready(true)`, a Redis Cluster node refused, a look
 * that timed out taken again, the wait for a connection bounded and shared.
 */
import { EventEmitter } from 'node:events';
import type { Redis } from 'ioredis';
import type { RedisConfig } from '../../src/config/redis-schema';
import {
  keepConnected,
  RedisConnection,
  redisOptions,
  ServerSwitched,
} from '../../src/fleet/redis/connection';
import { freePort, RedisServer } from '../../harness/redis/server';

const BASE: RedisConfig = {
  host: 'r.example',
  port: 6380,
  database: 3,
  ssl: false,
  ssl_verify: false,
  prefix: 'p:',
  timeout: 250,
  node_ttl_ms: 10_000,
};

describe('redisOptions', () => {
  it('standalone: host and port, bounded calls, no queue while down, pipelined, connecting at once', () => {
    const o = redisOptions({ ...BASE, username: 'u', password: 'pw' });
    expect(o).toMatchObject({
      host: 'r.example',
      port: 6380,
      username: 'u',
      password: 'pw',
      db: 3,
      connectTimeout: 250,
      commandTimeout: 250,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      enableAutoPipelining: true,
      lazyConnect: false,
    });
    expect(o.tls).toBeUndefined();
    expect(o.sentinels).toBeUndefined();
    expect(o.name).toBeUndefined();
  });

  it('an empty password sends no AUTH', () => {
    expect(redisOptions({ ...BASE, password: '' }).password).toBeUndefined();
  });

  it('reconnects after 100 ms a try, at most 2 s', () => {
    const retry = redisOptions(BASE).retryStrategy!;
    expect([1, 2, 19, 20, 21, 50].map((n) => retry(n))).toEqual([100, 200, 1900, 2000, 2000, 2000]);
  });

  it('TLS: verification and the SNI name, for Sentinel too', () => {
    const o = redisOptions({
      ...BASE,
      ssl: true,
      ssl_verify: true,
      server_name: 'redis.internal',
      sentinel_master: 'm',
      sentinel_nodes: [{ host: 's1', port: 26379 }],
    });
    expect(o.tls).toEqual({ rejectUnauthorized: true, servername: 'redis.internal' });
    expect(o.sentinelTLS).toEqual({ rejectUnauthorized: true, servername: 'redis.internal' });
    expect(o.enableTLSForSentinelMode).toBe(true);
  });

  it('Sentinel: the primary by name, the role checked, the failover detector, the same backoff', () => {
    const o = redisOptions({
      ...BASE,
      sentinel_master: 'm',
      sentinel_nodes: [{ host: 's1', port: 26379 }],
      sentinel_username: 'su',
      sentinel_password: 'sp',
    });
    expect(o).toMatchObject({
      sentinels: [{ host: 's1', port: 26379 }],
      name: 'm',
      role: 'master',
      sentinelUsername: 'su',
      sentinelPassword: 'sp',
      sentinelCommandTimeout: 250,
      failoverDetector: true,
      enableTLSForSentinelMode: false,
    });
    expect(o.host).toBeUndefined();
    expect(o.sentinelRetryStrategy!(3)).toBe(300);
    expect(o.sentinelRetryStrategy!(40)).toBe(2000);
  });
});

/** A client that only ends and connects, as keepConnected sees one. */
class FakeClient extends EventEmitter {
  status = 'ready';
  connects = 0;
  connect(): Promise<void> {
    this.connects++;
    return Promise.reject(new Error('refused'));
  }
}

describe('keepConnected', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('connects an ended client again after the backoff, longer each time until ready', async () => {
    const c = new FakeClient();
    keepConnected(c as unknown as Redis, () => false);
    c.status = 'end';
    c.emit('end');
    jest.advanceTimersByTime(99);
    expect(c.connects).toBe(0);
    jest.advanceTimersByTime(1);
    expect(c.connects).toBe(1);
    c.emit('end');
    jest.advanceTimersByTime(199);
    expect(c.connects).toBe(1);
    jest.advanceTimersByTime(1);
    expect(c.connects).toBe(2);
    // Ready again: the next end starts from the first delay.
    c.emit('ready');
    c.emit('end');
    jest.advanceTimersByTime(100);
    expect(c.connects).toBe(3);
    await Promise.resolve(); // the refused connect is swallowed
  });

  it('leaves a closed client, and one no longer ended, alone', () => {
    let closed = true;
    const c = new FakeClient();
    keepConnected(c as unknown as Redis, () => closed);
    c.status = 'end';
    c.emit('end');
    jest.advanceTimersByTime(5000);
    expect(c.connects).toBe(0);
    // Closed between the end and the timer.
    closed = false;
    c.emit('end');
    closed = true;
    jest.advanceTimersByTime(5000);
    expect(c.connects).toBe(0);
    // Reconnecting on its own meanwhile.
    closed = false;
    c.emit('end');
    c.status = 'connecting';
    jest.advanceTimersByTime(5000);
    expect(c.connects).toBe(0);
  });

  it('does not hold the process open', () => {
    const c = new FakeClient();
    const unref = jest.fn();
    const spy = jest
      .spyOn(global, 'setTimeout')
      .mockImplementation((() => ({ unref })) as unknown as typeof setTimeout);
    try {
      keepConnected(c as unknown as Redis, () => false);
      c.emit('end');
      expect(unref).toHaveBeenCalledTimes(1);
    } finally {
      spy.mockRestore();
    }
  });
});

describe('RedisConnection on a real redis-server', () => {
  let redis: RedisServer;
  const open: RedisConnection[] = [];
  beforeAll(async () => {
    redis = await RedisServer.start();
  });
  afterEach(() => {
    for (const c of open.splice(0)) c.close();
    redis.resume();
  });
  afterAll(async () => {
    await redis.close();
  });
  const connect = (config: RedisConfig, log?: { error: jest.Mock; warn: jest.Mock; info: jest.Mock }) => {
    const c = new RedisConnection(config, log);
    open.push(c);
    return c;
  };

  it('says a restarted server once to plain calls, until the probe takes it (ready(true))', async () => {
    const c = connect(redis.config('mc:', { timeout: 1000 }));
    const client = await c.ready();
    expect(await client.ping()).toBe('PONG');
    await redis.restart(false);
    // The reconnect (100 ms backoff) reaches the new server: a plain call is told, every time.
    await expect(c.ready()).rejects.toBeInstanceOf(ServerSwitched);
    await expect(c.ready()).rejects.toThrow(/another Redis server answers/);
    // The probe takes its leases there again: not a failure, and said no more after it.
    await expect(c.ready(true)).resolves.toBe(c.client);
    await expect(c.ready()).resolves.toBe(c.client);
  });

  it('a reconnect to the same server is no switch', async () => {
    const c = connect(redis.config('mc:', { timeout: 1000 }));
    await c.ready();
    await redis.command(['CLIENT', 'KILL', 'TYPE', 'normal']);
    await expect(c.ready()).resolves.toBe(c.client);
  });

  it('a look that failed (a timeout) is taken again by the next call', async () => {
    const c = connect(redis.config('mc:', { timeout: 1000 }));
    await new Promise<void>((r) => c.client.once('ready', () => r()));
    const info = jest.spyOn(c.client, 'info').mockRejectedValueOnce(new Error('Command timed out'));
    await expect(c.ready()).rejects.toThrow('Command timed out');
    await expect(c.ready()).resolves.toBe(c.client);
    expect(info).toHaveBeenCalledTimes(2);
    // Looked at once per stream: no INFO on every call.
    await c.ready();
    expect(info).toHaveBeenCalledTimes(2);
  });

  it('waits for a connection at most the connect bound, one wait shared by every call meanwhile', async () => {
    const port = await freePort();
    const c = connect({ ...redis.config('mc:'), port, connect_timeout: 300 });
    const t = Date.now();
    const [a, b] = await Promise.allSettled([c.ready(), c.ready()]);
    expect(a.status).toBe('rejected');
    expect(b.status).toBe('rejected');
    const [ea, eb] = [(a as PromiseRejectedResult).reason, (b as PromiseRejectedResult).reason];
    expect(ea.message).toBe('no connection to Redis within 300 ms');
    expect(eb).toBe(ea);
    expect(Date.now() - t).toBeGreaterThanOrEqual(290);
    // It stopped listening for a connection: only keepConnected's listener is left.
    expect(c.client.listenerCount('ready')).toBe(1);
    // The wait ended with it: the next call waits anew.
    const again = await c.ready().catch((e: Error) => e);
    expect(again).not.toBe(ea);
  });

  it('an end it did not ask for is connected again; close() ends it for good', async () => {
    const c = connect(redis.config('mc:', { timeout: 1000 }));
    await c.ready();
    // ioredis gives up (as its Sentinel connector can in a failover): status 'end', no retry of its own.
    const ended = new Promise((r) => c.client.once('end', r));
    c.client.disconnect();
    await ended;
    await new Promise((r) => setTimeout(r, 400));
    await expect(c.ready()).resolves.toBe(c.client);
    c.close();
    await new Promise((r) => setTimeout(r, 400));
    expect(c.client.status).toBe('end');
  });

  it('a wait that ends in a connection resolves every call made meanwhile', async () => {
    const c = connect(redis.config('mc:', { timeout: 2000 }));
    const [a, b] = await Promise.all([c.ready(), c.ready()]);
    expect(a).toBe(c.client);
    expect(b).toBe(c.client);
    // Connected: no listener left waiting for `ready`.
    expect(c.client.listenerCount('ready')).toBe(1); // keepConnected's
  });
});

describe('RedisConnection on a Redis Cluster node', () => {
  let cluster: RedisServer;
  beforeAll(async () => {
    cluster = await RedisServer.start({ args: ['--cluster-enabled', 'yes'] });
  });
  afterAll(async () => {
    await cluster.close();
  });

  it('refuses it on every call, logging it once', async () => {
    const log = { error: jest.fn(), warn: jest.fn(), info: jest.fn() };
    const c = new RedisConnection(cluster.config('mc:', { timeout: 1000 }), log);
    try {
      await expect(c.ready()).rejects.toThrow(
        /^Redis Cluster is not supported: 127\.0\.0\.1:\d+ runs in cluster mode/,
      );
      // Logged at the first look, not only at a later one.
      expect(log.error).toHaveBeenCalledTimes(1);
      await cluster.command(['CLIENT', 'KILL', 'TYPE', 'normal']);
      await new Promise((r) => setTimeout(r, 300));
      await expect(c.ready(true)).rejects.toThrow(/Redis Cluster is not supported/);
      expect(log.error).toHaveBeenCalledTimes(1);
      expect(log.error.mock.calls[0][0]).toMatch(/: this node decides from its own state$/);
    } finally {
      c.close();
    }
  });

  it('refuses it without a log to tell', async () => {
    const c = new RedisConnection(cluster.config('mc:', { timeout: 1000 }));
    try {
      await expect(c.ready()).rejects.toThrow(/^Redis Cluster is not supported/);
    } finally {
      c.close();
    }
  });
});
