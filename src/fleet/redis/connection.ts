import { Redis, type RedisOptions } from 'ioredis';
import { redisBounds } from '../../config/redis-enterprise';
import type { RedisConfig } from '../../config/redis-schema';
import type { Logger } from '../../log';

/**
 * ioredis options for a plugin's `redis` record: a standalone Redis at `host`, or the primary
 * Sentinel names (ioredis's SentinelConnector asks the sentinels, checks the role it reached,
 * and asks again on every reconnect). Bounded calls, no queueing while disconnected.
 */
export function redisOptions(c: RedisConfig): RedisOptions {
  const tls = c.ssl ? { rejectUnauthorized: c.ssl_verify, servername: c.server_name } : undefined;
  const bound = redisBounds(c);
  const where: RedisOptions =
    c.sentinel_master !== undefined
      ? {
          sentinels: c.sentinel_nodes,
          name: c.sentinel_master,
          role: 'master',
          sentinelUsername: c.sentinel_username,
          sentinelPassword: c.sentinel_password,
          sentinelCommandTimeout: bound.call,
          // All sentinels unreachable: ask again soon, as the standalone reconnect does.
          sentinelRetryStrategy: reconnectDelay,
          // Subscribes to the sentinels' +switch-master: the client leaves a demoted primary at once.
          failoverDetector: true,
          enableTLSForSentinelMode: c.ssl,
          sentinelTLS: tls,
        }
      : { host: c.host, port: c.port };
  return {
    ...where,
    username: c.username,
    // Kong's Redis record: an empty password sends no AUTH (kong/tools/redis/schema.lua).
    password: c.password === '' ? undefined : c.password,
    db: c.database,
    tls,
    connectTimeout: bound.connect,
    commandTimeout: bound.call,
    // A request must never wait for a reconnect: while down, calls fail at once (local decisions).
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: reconnectDelay,
    // Concurrent requests' calls share round trips.
    enableAutoPipelining: true,
    lazyConnect: false,
  };
}

/**
 * Connects `client` again whenever it ends without being closed (`closed()` false), after the
 * same backoff as its reconnects. ioredis 5.11.1 can end a Sentinel client for good in a
 * failover: `+switch-master` reaching the failover detector while a reconnect is still asking a
 * sentinel for the primary stops the connector (FailoverDetector.js `disconnect`), the pending
 * lookup then fails with "Connection is closed." (SentinelConnector/index.js `connectToNext`),
 * and `Redis._connect` sets status `end` without asking `retryStrategy` (Redis.js). The node
 * would decide alone until restarted; the window is a sentinel's answer time, wide under load.
 */
export function keepConnected(client: Redis, closed: () => boolean): void {
  let attempts = 0;
  client.on('ready', () => (attempts = 0));
  client.on('end', () => {
    if (closed()) return;
    const timer = setTimeout(() => {
      if (!closed() && client.status === 'end') client.connect().catch(() => {});
    }, reconnectDelay(++attempts));
    timer.unref();
  });
}

/** Milliseconds before reconnect `times` (1, 2, ...): the standalone client's backoff too. */
function reconnectDelay(times: number): number {
  return Math.min(100 * times, 2000);
}

/** A call's failure saying another Redis server answers: the caller must take its leases there again. */
export class ServerSwitched extends Error {}

/**
 * The command connection of a RedisFleetStore: the client, usable once connected and once the
 * server it reached was looked at (one INFO per connection). It refuses a Redis Cluster node,
 * and reports a changed server (a Sentinel failover, a restart) once, as a failed call: the
 * failover store then takes this node's leases there again, as after any outage, so a lease
 * the old primary acknowledged but never replicated is not lost.
 */
export class RedisConnection {
  readonly client: Redis;
  /** The stream last looked at, and that look (pending or done). */
  private inspected: { stream: unknown; done: Promise<void> } | null = null;
  /** Why this server cannot hold the fleet state, or null. */
  private refusal: Error | null = null;
  private runId: string | null = null;
  /**
   * A server other than the last one answered: said to every call until the failover store's
   * probe (`ready(true)`) takes this node's leases there again. Said once, the calls beside that
   * one ran on a server that may lack this node's leases (an unload granted under one).
   */
  private switched: string | null = null;
  /** The wait for a connection in progress, shared by every call made meanwhile. */
  private waiting: Promise<void> | null = null;
  private closed = false;

  constructor(
    private readonly config: RedisConfig,
    /** Told of a refused server when first seen (the failover store may have degraded for another reason already). */
    private readonly log?: Logger,
  ) {
    this.client = new Redis(redisOptions(config));
    // Errors surface on calls; the connection's own events would only repeat them.
    this.client.on('error', () => {});
    keepConnected(this.client, () => this.closed);
  }

  close(): void {
    this.closed = true;
    this.client.disconnect();
  }

  /**
   * The client once connected and inspected, waiting up to the timeout (calls do not queue
   * meanwhile). `recovering`: the caller is taking its leases there again anyway (the failover
   * store's probe), so a changed server is not reported as a failure, which would only delay that.
   */
  async ready(recovering = false): Promise<Redis> {
    if (this.client.status !== 'ready') await this.connected();
    const stream = this.client.stream;
    if (this.inspected?.stream !== stream) {
      const look = { stream, done: this.inspect() };
      // A look that failed (a timeout) is taken again by the next call.
      look.done.catch(() => {
        if (this.inspected === look) this.inspected = null;
      });
      this.inspected = look;
    }
    await this.inspected!.done;
    if (this.refusal) throw this.refusal;
    if (this.switched !== null) {
      if (!recovering) throw new ServerSwitched(this.switched);
      this.switched = null;
    }
    return this.client;
  }

  private async inspect(): Promise<void> {
    const info = parseInfo(await this.client.info());
    const at = `${this.client.stream?.remoteAddress ?? '?'}:${this.client.stream?.remotePort ?? '?'}`;
    // redis.io cluster spec: INFO's `cluster_enabled:1` on a node started with cluster-enabled yes.
    const refused = this.refusal !== null;
    this.refusal =
      info.get('cluster_enabled') === '1'
        ? new Error(
            `Redis Cluster is not supported: ${at} runs in cluster mode (cluster_enabled:1), and the fleet's scripts touch keys in many hash slots. Use a standalone Redis, or Sentinel (sentinel_master, sentinel_nodes)`,
          )
        : null;
    if (this.refusal && !refused)
      this.log?.error(`${this.refusal.message}: this node decides from its own state`);
    const runId = info.get('run_id') ?? null;
    if (this.runId !== null && runId !== this.runId)
      this.switched = `another Redis server answers (${at}, after a failover or a restart): this node takes its leases there again`;
    this.runId = runId;
  }

  private connected(): Promise<void> {
    this.waiting ??= new Promise<void>((resolve, reject) => {
      const done = (err?: Error) => {
        clearTimeout(timer);
        this.client.off('ready', onReady);
        this.waiting = null;
        if (err) reject(err);
        else resolve();
      };
      const onReady = () => done();
      const { connect } = redisBounds(this.config);
      const timer = setTimeout(() => done(new Error(`no connection to Redis within ${connect} ms`)), connect);
      timer.unref();
      this.client.once('ready', onReady);
    });
    return this.waiting;
  }
}

/** INFO's `field:value` lines. */
function parseInfo(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split('\r\n')) {
    const i = line.indexOf(':');
    if (i > 0) out.set(line.slice(0, i), line.slice(i + 1));
  }
  return out;
}
