import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import type { RedisConfig } from '../../src/config/redis-schema';
import { waitFor } from '../wait';

/**
 * A real `redis-server` (Debian's package) on a loopback port for one test file: no
 * persistence, its own directory. `stop` and `start` again keep the port, so a test can take
 * Redis away mid-run and bring it back.
 */
export class RedisServer {
  private child: ChildProcess | null = null;
  private readonly dir = mkdtempSync(join(tmpdir(), 'klr-redis-'));

  private constructor(
    readonly port: number,
    /** `requirepass`: clients must AUTH with it. */
    readonly password?: string,
    /** More `redis-server` arguments (`--cluster-enabled yes`...). */
    private readonly extraArgs: string[] = [],
  ) {}

  static async start(o: { password?: string; args?: string[] } = {}): Promise<RedisServer> {
    const s = new RedisServer(await freePort(), o.password, o.args);
    await s.start();
    return s;
  }

  async start(): Promise<void> {
    const child = spawn(
      'redis-server',
      [
        '--port',
        String(this.port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        this.dir,
        ...(this.password !== undefined ? ['--requirepass', this.password] : []),
        ...this.extraArgs,
      ],
      { stdio: 'ignore' },
    );
    child.on('error', () => {});
    this.child = child;
    await waitFor(() => this.ping(), 10_000, `redis-server on port ${this.port}`);
  }

  get running(): boolean {
    return this.child !== null;
  }

  /** SIGSTOP: Redis hangs (connections stay open, nothing answers) until `resume`. */
  pause(): void {
    this.child?.kill('SIGSTOP');
  }

  resume(): void {
    this.child?.kill('SIGCONT');
  }

  /** SIGKILL: Redis vanishes as in a crash (connections reset, nothing saved). */
  async stop(): Promise<void> {
    const child = this.child;
    this.child = null;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  }

  /**
   * A restart on the same port, down for `downMs`. `persist`: the data set is saved (SAVE, an RDB snapshot in this
   * server's directory) and loaded again at start, as a Redis with persistence comes back;
   * otherwise it comes back empty, as one without.
   */
  async restart(persist: boolean, downMs = 0): Promise<void> {
    const dump = join(this.dir, 'dump.rdb');
    if (persist) await this.command(['SAVE']);
    await this.stop();
    if (!persist) rmSync(dump, { force: true });
    if (downMs > 0) await new Promise((r) => setTimeout(r, downMs));
    await this.start();
  }

  /** One command on a fresh connection (the caller's own, not the nodes'). */
  async command(args: [string, ...(string | number)[]]): Promise<unknown> {
    const c = new Redis({ port: this.port, host: '127.0.0.1', maxRetriesPerRequest: 0, lazyConnect: true });
    c.on('error', () => {});
    try {
      await c.connect();
      return await c.call(...args);
    } finally {
      c.disconnect();
    }
  }

  /** How many clients are subscribed to `channel` (PUBSUB NUMSUB): a store's subscriber is up once it counts. */
  async subscribers(channel: string): Promise<number> {
    return Number(((await this.command(['PUBSUB', 'NUMSUB', channel])) as [string, number])[1]);
  }

  async close(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** The plugins' `redis` record for this server. */
  config(prefix: string, extra: Partial<RedisConfig> = {}): RedisConfig {
    return {
      host: '127.0.0.1',
      port: this.port,
      database: 0,
      ssl: false,
      ssl_verify: false,
      prefix,
      timeout: 200,
      node_ttl_ms: 10_000,
      ...extra,
    };
  }

  private async ping(): Promise<boolean> {
    const c = new Redis({
      port: this.port,
      host: '127.0.0.1',
      password: this.password,
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    c.on('error', () => {});
    try {
      await c.connect();
      return (await c.ping()) === 'PONG';
    } catch {
      return false;
    } finally {
      c.disconnect();
    }
  }
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}
