/**
 * The plugin-server process, started as Kong's `pluginserver_*_start_cmd` would (Kong/kong
 * 3.9.3 `kong/runloop/plugin_servers/process.lua`: worker 0 spawns it, copies its output to
 * error.log at INFO, and restarts it when it dies).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { RpcConnection } from './rpc';
import { tmpdir } from 'node:os';
import { join, resolve, sep } from 'node:path';

/** The repository root, from harness/kong (ts-jest) or dist/harness/kong (compiled). */
export const ROOT = join(
  __dirname,
  ...(__dirname.includes(`${sep}dist${sep}`) ? ['..', '..', '..'] : ['..', '..']),
);

/**
 * Preload for every server started here: kong-pdk's `require('ts-node')` gets the stand-in the
 * npm package and the image ship (scripts/pack/ts-node), as on Kong's node. The real one loaded
 * TypeScript at every start (about 0.5 s of CPU), for .ts plugins there are none of.
 */
export const TS_NODE_STAND_IN = join(ROOT, 'harness', 'kong', 'ts-node-stand-in.cjs');

export interface PluginServerOptions {
  /** Absolute path of the compiled plugins directory (the server `require.resolve`s it). */
  pluginsDir: string;
  sockName?: string;
  /** Receives the server's stdout and stderr (its log; Kong copies it to error.log). */
  onLog?: (line: string) => void;
  /** Extra node options (tests: --expose-gc and a heap probe). */
  nodeArgs?: string[];
  /** The server's entry script (default: the project's, `binary()`). */
  binary?: string;
  /** An executable run instead of Node with `binary` (the installed `kong-lora-pluginserver`). */
  command?: string;
  /** Extra environment (tests: NODE_EXTRA_CA_CERTS for a self-signed replica). */
  env?: Record<string, string>;
  /** How long the server may take to listen (default 30 s: a loaded 2-core machine is slow to start node). */
  readyMs?: number;
  /** Told the child's pid once spawned (tests of the start itself). */
  onSpawn?: (pid: number) => void;
}

export class PluginServerProcess {
  private constructor(
    readonly child: ChildProcess,
    readonly socketPath: string,
    private readonly prefix: string,
    readonly log: string[],
    private readonly options: PluginServerOptions,
  ) {}

  /**
   * The project's plugin-server entry (pluginserver/main.ts): kong-pdk's server with the
   * fixes Kong needs (docs/kong.md). Needs `npm run build`.
   */
  static binary(): string {
    return join(ROOT, 'dist', 'pluginserver', 'main.js');
  }

  /** Starts the server as Kong's `pluginserver_*_start_cmd` would; resolves once it accepts connections. */
  static async start(
    o: PluginServerOptions,
    prefix = mkdtempSync(join(tmpdir(), 'kong-prefix-')),
  ): Promise<PluginServerProcess> {
    const sockName = o.sockName ?? 'lora.sock';
    const child = spawn(
      o.command ?? process.execPath,
      [
        ...(o.command
          ? []
          : [
              ...['--require', TS_NODE_STAND_IN],
              ...(o.nodeArgs ?? []),
              o.binary ?? PluginServerProcess.binary(),
            ]),
        '-d',
        resolve(o.pluginsDir),
        '-p',
        prefix,
        '--sock-name',
        sockName,
      ],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, ...o.env },
      },
    );
    const log: string[] = [];
    // Lines, not chunks: a line can straddle two chunks of a busy stream.
    const reader = () => {
      let partial = '';
      return (chunk: Buffer) => {
        const lines = (partial + chunk.toString('utf8')).split('\n');
        partial = lines.pop()!;
        for (const line of lines) {
          if (!line) continue;
          // The most recent lines (a long run logs more than is worth keeping).
          log.push(line);
          if (log.length > 10000) log.splice(0, log.length - 10000);
          o.onLog?.(line);
        }
      };
    };
    child.stdout!.on('data', reader());
    child.stderr!.on('data', reader());
    if (child.pid !== undefined) o.onSpawn?.(child.pid);
    const server = new PluginServerProcess(child, join(prefix, sockName), prefix, log, o);
    try {
      await server.waitReady(o.readyMs ?? 30_000);
    } catch (err) {
      // Nothing may outlive a failed start: a running child keeps jest (and CI) waiting.
      await server.stop();
      throw new Error(`${(err as Error).message}; its output:\n${log.join('\n')}`);
    }
    return server;
  }

  private async waitReady(ms: number): Promise<void> {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      if (this.child.exitCode !== null)
        throw new Error(`plugin server exited (${this.child.exitCode}): ${this.log.join('\n')}`);
      if (existsSync(this.socketPath) && (await canConnect(this.socketPath))) return;
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error(`plugin server did not listen on ${this.socketPath} within ${ms} ms`);
  }

  get exited(): boolean {
    return this.child.exitCode !== null || this.child.signalCode !== null;
  }

  /** Kills the process and starts it again on the same socket, as Kong restarts a dead plugin server. */
  async restart(): Promise<PluginServerProcess> {
    await this.kill();
    return PluginServerProcess.start(this.options, this.prefix);
  }

  /** SIGKILL, as a crash would; the socket file stays (Kong restarts the server). */
  async kill(): Promise<void> {
    await this.signal('SIGKILL');
  }

  async stop(): Promise<void> {
    await this.signal('SIGTERM');
    rmSync(this.prefix, { recursive: true, force: true });
  }

  private signal(sig: NodeJS.Signals): Promise<void> {
    if (this.exited) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.child.kill('SIGKILL'), 3000);
      this.child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      this.child.kill(sig);
    });
  }
}

function canConnect(path: string): Promise<boolean> {
  return RpcConnection.connect(path).then(
    (c) => (c.close(), true),
    () => false,
  );
}
