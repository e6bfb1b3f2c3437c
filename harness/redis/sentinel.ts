import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import type { RedisConfig } from '../../src/config/redis-schema';
import { freePort, RedisServer } from './server';
import { waitFor } from '../wait';

export const MASTER_NAME = 'lora';

/**
 * Redis with Sentinel on loopback, from Debian's packages: a primary, a replica of it, and
 * three `redis-sentinel` processes watching them with quorum 2, as a small HA deployment has.
 * Failure detection is quick (`down-after-milliseconds` 1000) so a test can fail the primary
 * over in a few seconds.
 */
export class SentinelSet {
  private constructor(
    readonly primary: RedisServer,
    readonly replica: RedisServer,
    readonly sentinelPorts: number[],
    private readonly sentinels: ChildProcess[],
    private readonly dir: string,
  ) {}

  static async start(n = 3, quorum = 2): Promise<SentinelSet> {
    const primary = await RedisServer.start();
    const replica = await RedisServer.start({ args: ['--replicaof', '127.0.0.1', String(primary.port)] });
    const dir = mkdtempSync(join(tmpdir(), 'klr-sentinel-'));
    const ports: number[] = [];
    const children: ChildProcess[] = [];
    for (let i = 0; i < n; i++) {
      const port = await freePort();
      const conf = join(dir, `sentinel-${i}.conf`);
      // Sentinel rewrites its file (known replicas, sentinels, epochs): one writable file each.
      writeFileSync(
        conf,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${dir}`,
          `sentinel monitor ${MASTER_NAME} 127.0.0.1 ${primary.port} ${quorum}`,
          `sentinel down-after-milliseconds ${MASTER_NAME} 1000`,
          `sentinel failover-timeout ${MASTER_NAME} 5000`,
          `sentinel parallel-syncs ${MASTER_NAME} 1`,
          '',
        ].join('\n'),
      );
      const child = spawn('redis-sentinel', [conf], { stdio: 'ignore' });
      child.on('error', () => {});
      ports.push(port);
      children.push(child);
    }
    const set = new SentinelSet(primary, replica, ports, children, dir);
    try {
      // Ready when the replica is in sync and every sentinel sees the replica and a quorum.
      await waitFor(
        async () => (await info(replica.port)).includes('master_link_status:up'),
        15_000,
        'the replica in sync',
      );
      for (const port of ports)
        await waitFor(
          async () => {
            const ok = await sentinelCall(port, 'CKQUORUM', MASTER_NAME).catch(() => '');
            const replicas = (await sentinelCall(port, 'REPLICAS', MASTER_NAME).catch(() => [])) as unknown[];
            return String(ok).startsWith('OK') && replicas.length === 1;
          },
          20_000,
          `sentinel on ${port} seeing the replica and a quorum`,
        );
    } catch (err) {
      await set.close();
      throw err;
    }
    return set;
  }

  /** The plugins' `redis` record for this set: Sentinel, under Kong Enterprise's field names. */
  config(prefix: string, extra: Partial<RedisConfig> = {}): Record<string, unknown> {
    return {
      sentinel_master: MASTER_NAME,
      sentinel_role: 'master',
      sentinel_nodes: this.sentinelPorts.map((port) => ({ host: '127.0.0.1', port })),
      prefix,
      ...extra,
    };
  }

  /** The primary's port as sentinel `i` reports it. */
  async primaryPort(i = 0): Promise<number> {
    const [, port] = (await sentinelCall(this.sentinelPorts[i]!, 'GET-MASTER-ADDR-BY-NAME', MASTER_NAME)) as [
      string,
      string,
    ];
    return Number(port);
  }

  /**
   * Stops sentinel `i` (SIGSTOP) or lets it go on (SIGCONT): stopped, it still accepts
   * connections (the kernel does) but answers nothing, as a sentinel on a starved host.
   */
  pause(i: number, stopped = true): void {
    this.sentinels[i]!.kill(stopped ? 'SIGSTOP' : 'SIGCONT');
  }

  async close(): Promise<void> {
    await Promise.all(
      this.sentinels.map(
        (c) =>
          new Promise<void>((resolve) => {
            if (c.exitCode !== null || c.signalCode !== null) return resolve();
            c.once('exit', () => resolve());
            c.kill('SIGKILL');
          }),
      ),
    );
    await this.primary.close();
    await this.replica.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** One command on a fresh connection (bounded: no retries, 2 s). */
async function withClient<T>(port: number, fn: (c: Redis) => Promise<T>): Promise<T> {
  const c = new Redis({
    port,
    host: '127.0.0.1',
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    commandTimeout: 2000,
    connectTimeout: 2000,
  });
  c.on('error', () => {});
  try {
    await c.connect();
    return await fn(c);
  } finally {
    c.disconnect();
  }
}

function sentinelCall(port: number, ...args: string[]): Promise<unknown> {
  return withClient(port, (c) => c.call('SENTINEL', ...args));
}

/** `INFO` of the server on `port`. */
export function info(port: number): Promise<string> {
  return withClient(port, (c) => c.info());
}

/** Any command on the server on `port` (a fresh connection). */
export function redisCall(port: number, ...args: (string | number)[]): Promise<unknown> {
  return withClient(port, (c) => c.call(String(args[0]), ...args.slice(1).map(String)));
}
