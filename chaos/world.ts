/**
 * The fault run's world: one real redis-server, three real plugin servers (Kong nodes), each
 * node's Redis link through its own TCP proxy, simulated vLLM replicas on loopback, and a
 * LocalGateway per node driving the plugins over their socket as Kong does.
 */
import { join } from 'node:path';
import { SimFleet } from '../sim/fleet';
import { LocalGateway } from '../stack/gateway';
import { CLOCK_SKEW_ENV } from '../pluginserver/clock-skew';
import type { RedisConfig } from '../src/config/redis-schema';
import { KongDriver, PluginServerProcess } from '../harness/kong/driver';
import { ROOT } from '../harness/kong/process';
import { RedisServer } from '../harness/redis/server';
import { TcpProxy } from '../harness/net/tcp-proxy';
import { BoundedLog, NODE_LOG_MAX_BYTES, nodeLogPath, Ring } from './recorder';
import { AloneSpans } from './alone';
import { Senders } from './senders';

export const BASE = 'meta-llama/Llama-3.1-8B-Instruct';
export const PREFIX = 'chaos:';

export interface WorldOptions {
  nodes: number;
  replicas: number;
  maxLoadedAdapters: number;
  coldLoadsPerMinute: number;
  pollIntervalMs: number;
  skewMs: number;
  /** The nodes' Redis timeouts (`timeout`, `node_ttl_ms`); a `timeouts` record change adds a little to each. */
  timeoutMs: number;
  nodeTtlMs: number;
  /** The compiled plugins the nodes load (default `dist/plugins`; a test points it elsewhere). */
  pluginsDir?: string;
}

/** Which `redis` record the nodes use: the database (the state) and whether timeouts were changed. */
export interface RecordVariant {
  database: number;
  timeouts: boolean;
}

export interface ChaosNode {
  index: number;
  server: PluginServerProcess;
  proxy: TcpProxy;
  router: LocalGateway;
  status: LocalGateway;
  variant: RecordVariant;
  skewed: boolean;
  /**
   * The plugin server's last operational log lines, with the wall-clock time they came: the
   * last, not the first, as the end of a long run is where a node goes wrong.
   */
  notices: Ring<{ at: number; line: string }>;
  /** When it decided alone (Redis unreachable to it), from its own log: (ii)'s excuses. */
  alone: AloneSpans;
  /** Every line of its output, with `--log-dir`. */
  logFile?: BoundedLog;
  /** How long its last answered status request took, ms (-1: none yet). */
  statusMs: number;
  /** What the status route last answered instead of the fleet status (the report shows it). */
  statusProblem?: string;
  /** Set when the plugin server exited before the run stopped it: a failure of the run. */
  death?: NodeDeath;
  /** Stray rejections the plugin server logged and survived (pluginserver/stray-errors.ts): bugs too. */
  strays: string[];
}

/** A plugin server that exited on its own: how, when, and what it wrote last. */
export interface NodeDeath {
  /** Wall-clock Unix ms of the exit. */
  at: number;
  code: number | null;
  signal: string | null;
  /** The last lines of its stdout and stderr (DEATH_LINES). */
  lastLines: string[];
}

/** How many of each node's last operational lines the report keeps. */
export const NOTICE_LINES = 1000;
/** How many of a dying plugin server's last output lines the report keeps. */
export const DEATH_LINES = 200;
/** Terminal escapes (kong-pdk's logger colours its lines): the report shows plain text. */
const ANSI = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*[A-Za-z]`, 'g');

export class ChaosWorld {
  private constructor(
    readonly o: WorldOptions,
    readonly redis: RedisServer,
    readonly fleet: SimFleet,
    readonly nodes: ChaosNode[],
  ) {}

  /** Set by stop(): exits after it are the run's own. */
  private stopping = false;

  /** Who sent each request the replicas received, and when it reached them: (i)'s witness. */
  readonly senders = new Senders(
    () => new Map(this.nodes.flatMap((n) => (n.server.child.pid ? [[n.server.child.pid, n.index]] : []))),
    (node) => this.nodes[node]?.alone.now ?? false,
  );

  /** With `logDir`, each node's whole output goes to `node-N.log` there. */
  static async start(o: WorldOptions, logDir?: string): Promise<ChaosWorld> {
    const redis = await RedisServer.start();
    const fleet = await SimFleet.start(
      Array.from({ length: o.replicas }, () => ({
        adapterDirs: ['/adapters'],
        // Wall-clock time: the sim log lines up with the nodes' clocks and the schedule.
        timeScale: 1,
        engine: { loadBaseMs: 200 },
      })),
    );
    const world = new ChaosWorld(o, redis, fleet, []);
    for (const r of fleet.replicas) r.onRequest = (req, res) => world.senders.onRequest(r.url, req, res);
    // Side by side: a plugin server takes seconds to start on a loaded machine. Every start is
    // waited for, so a failed one stops the nodes that did start (each stops its own parts).
    const starts = await Promise.allSettled(
      Array.from({ length: o.nodes }, (_, i) => world.startNode(i, logDir)),
    );
    for (const s of starts) if (s.status === 'fulfilled') world.nodes.push(s.value);
    const failed = starts.find((s) => s.status === 'rejected');
    if (failed) {
      await world.stop();
      throw failed.reason;
    }
    return world;
  }

  /** The `redis` record of a node whose proxy listens on `port`, for `v`: the shared prefix. */
  record(port: number, v: RecordVariant): RedisConfig {
    return {
      host: '127.0.0.1',
      port,
      database: v.database,
      ssl: false,
      ssl_verify: false,
      prefix: PREFIX,
      timeout: this.o.timeoutMs + (v.timeouts ? 200 : 0),
      node_ttl_ms: this.o.nodeTtlMs + (v.timeouts ? 500 : 0),
    };
  }

  routerConfig(redis: RedisConfig): Record<string, unknown> {
    return {
      replicas: this.fleet.urls.map((url) => ({ url })),
      base_model: BASE,
      adapter_path_template: '/adapters/{name}',
      max_loaded_adapters: this.o.maxLoadedAdapters,
      queue_timeout_ms: 1000,
      cold_loads_per_minute: this.o.coldLoadsPerMinute,
      redis,
    };
  }

  pollerConfig(redis: RedisConfig): Record<string, unknown> {
    return { poll_interval_ms: this.o.pollIntervalMs, timeout_ms: 500, redis };
  }

  private async startNode(index: number, logDir?: string): Promise<ChaosNode> {
    const proxy = await TcpProxy.start(this.redis.port);
    const logFile = logDir ? new BoundedLog(nodeLogPath(logDir, index), NODE_LOG_MAX_BYTES) : undefined;
    // What started so far, stopped in reverse if the node cannot start: a listening proxy or a
    // running plugin server keeps the process (jest, CI) alive after the failure.
    const started: (() => Promise<unknown> | void)[] = [() => proxy.close(), () => logFile?.close()];
    try {
      return await this.startNodeOn(index, proxy, logFile, started);
    } catch (err) {
      for (const stop of started.reverse()) await Promise.resolve(stop()).catch(() => {});
      throw err;
    }
  }

  private async startNodeOn(
    index: number,
    proxy: TcpProxy,
    logFile: BoundedLog | undefined,
    started: (() => Promise<unknown> | void)[],
  ): Promise<ChaosNode> {
    const notices = new Ring<{ at: number; line: string }>(NOTICE_LINES);
    const alone = new AloneSpans();
    const strays: string[] = [];
    const server = await PluginServerProcess.start({
      pluginsDir: this.o.pluginsDir ?? join(ROOT, 'dist', 'plugins'),
      env: { [CLOCK_SKEW_ENV]: String(this.o.skewMs) },
      // The router's warnings and errors (shared state lost, replicas down, unloads withheld) and
      // its shared-state notices, timed; not every load and unload (the sim log has those).
      onLog: (line) => {
        logFile?.line(`${new Date().toISOString()} ${line.replace(ANSI, '')}`);
        if (line.includes('unhandled promise rejection') && strays.length < 20) strays.push(line);
        const notice =
          /\[kong-lora-router\] (warn|error):/.test(line) ||
          /\[kong-lora-router\] info: .*(shared|lease|epoch)/.test(line);
        if (notice) notices.push({ at: Date.now(), line: line.replace(/^.*\[kong-lora-router\] /, '') });
        alone.push(Date.now(), line);
      },
    });
    started.push(() => server.stop());
    const variant: RecordVariant = { database: 0, timeouts: false };
    const redis = this.record(proxy.port, variant);
    // One driver per node, as Kong's node has: plugin ids (`__seq__`) are unique across its routes.
    const driver = new KongDriver(server.socketPath);
    started.push(() => driver.close());
    const router = await LocalGateway.create({
      driver,
      plugins: [{ name: 'lora-router', config: this.routerConfig(redis) }],
      serviceUrl: this.fleet.urls[0]!,
      timeouts: { read_timeout: 30_000 },
    });
    started.push(() => router.close());
    const status = await LocalGateway.create({
      driver,
      node: router.node,
      plugins: [{ name: 'lora-poller', config: this.pollerConfig(redis) }],
      serviceUrl: 'http://127.0.0.1:9',
    });
    const node: ChaosNode = {
      index,
      server,
      proxy,
      router,
      status,
      variant,
      skewed: false,
      notices,
      alone,
      logFile,
      statusMs: -1,
      strays,
    };
    // 'close', not 'exit': by then its stdout and stderr are drained, so the last words are in.
    server.child.once('close', (code, signal) => {
      if (this.stopping) return;
      const lastLines = server.log
        .slice(-DEATH_LINES)
        .map((l) => l.replace(ANSI, ''))
        .filter((l) => l.trim() !== '');
      node.death = { at: Date.now(), code, signal, lastLines };
    });
    return node;
  }

  /** A node's `redis` record changes (router and poller alike, as one Kong configuration). */
  async reconfigure(n: ChaosNode, v: RecordVariant): Promise<void> {
    n.variant = v;
    const redis = this.record(n.proxy.port, v);
    await n.router.configure([{ name: 'lora-router', config: this.routerConfig(redis) }]);
    await n.status.configure([{ name: 'lora-poller', config: this.pollerConfig(redis) }]);
  }

  /** Toggles node `n`'s clock skew (the plugin server's SIGUSR2 hook). */
  toggleSkew(n: ChaosNode): void {
    n.server.child.kill('SIGUSR2');
    n.skewed = !n.skewed;
  }

  /** The node's lora-poller status, or null (and why in `statusProblem`) within `ms`. */
  async nodeStatus(n: ChaosNode, ms = 5000): Promise<{ store: string; inFlight: number } | null> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<null>((resolve) => {
      timer = setTimeout(() => {
        n.statusProblem = `no answer within ${ms} ms`;
        resolve(null);
      }, ms);
    });
    try {
      return await Promise.race([this.readStatus(n), late]);
    } finally {
      clearTimeout(timer);
    }
  }

  private async readStatus(n: ChaosNode): Promise<{ store: string; inFlight: number } | null> {
    const t0 = Date.now();
    try {
      const r = await n.status.handle({ method: 'GET', path: '/lora/status' });
      if (r.status === 200) {
        n.statusProblem = undefined;
        n.statusMs = Date.now() - t0;
        return JSON.parse(r.body.toString()) as { store: string; inFlight: number };
      }
      n.statusProblem = `${r.status} ${r.body.toString().slice(0, 300)} ${r.kong.luaErrors.join('; ')}`;
      return null;
    } catch (err) {
      n.statusProblem = (err as Error).message;
      return null;
    }
  }

  async stop(): Promise<void> {
    this.stopping = true;
    for (const n of this.nodes) {
      await n.router.close().catch(() => {});
      await n.status.close().catch(() => {});
      await n.server.stop();
      await n.proxy.close();
      n.logFile?.close();
    }
    await this.fleet.stop();
    await this.redis.close();
  }
}
