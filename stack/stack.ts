import { join } from 'node:path';
import { SimFleet } from '../sim/fleet';
import { KongDriver, PluginServerProcess } from '../harness/kong/driver';
import { parseRouterConfig } from '../src/config/parse';
import { routerConfigWarnings } from '../src/config/warnings';
import { fleetFor } from './fleet-spec';
import { keyAuthOf } from './key-auth';
import { LocalGateway } from './gateway';
import { plainLines } from './log-lines';
import { readKongYaml, routerConfig, type StackService } from './kong-config';
import { StackServer } from './server';

export interface StackOptions {
  /** The gateway's port (Kong's proxy port). */
  port: number;
  host: string;
  /** A decK file; replica URLs in its lora-router config are replaced by the simulated fleet's. */
  kongYaml: string;
  /** First port of the simulated replicas (0 = ephemeral). */
  fleetPort: number;
  /**
   * The user's own replicas instead of the simulator: `URL` (backend probed) or
   * `vllm=URL` / `llamacpp=URL`; `'config'` takes the replicas kong.yml names, as they are.
   */
  replicas?: string[] | 'config';
  /** The base model, when the user's replicas serve another than kong.yml's (default: asked of the first replica). */
  baseModel?: string;
  timeScale: number;
  pluginsDir?: string;
  log: (line: string) => void;
  /** Enforce kong.yml's key-auth (header or query key, its consumers' keys) as Kong would. */
  keyAuth?: boolean;
  /** Extra node options and environment for the plugin server (tests: a preload). */
  pluginServerNode?: { args: string[]; env: Record<string, string> };
}

/**
 * The whole system on one machine: a simulated fleet, the real kong-js-pluginserver on
 * dist/plugins, and a local gateway playing Kong's proxy path for the services in kong.yml.
 */
export class LocalStack {
  private constructor(
    readonly url: string,
    /** The simulated fleet; null against the user's own replicas. */
    readonly fleet: SimFleet | null,
    /** The replicas the router routes to. */
    readonly replicas: { backend: string; url: string }[],
    readonly services: StackService[],
    private readonly pluginServer: PluginServerProcess,
    private readonly gateways: LocalGateway[],
    private readonly server: StackServer,
  ) {}

  static async start(o: StackOptions): Promise<LocalStack> {
    const services = readKongYaml(o.kongYaml);
    const fleetService = services.find((s) => routerConfig(s));
    if (!fleetService) throw new Error(`${o.kongYaml}: no service has the lora-router plugin`);
    const config = routerConfig(fleetService)!;
    let fleet: SimFleet | null = null;
    if (o.replicas) {
      // The user's replicas: a dry run of the real plugins before touching Kong.
      if (o.replicas !== 'config') config.replicas = await userReplicas(o.replicas);
      // The user's own kong.yml names its base model; with replica URLs alone, ask them.
      const named = o.replicas === 'config' ? (config.base_model as string | undefined) : undefined;
      config.base_model =
        o.baseModel ?? named ?? (await baseModelOf((config.replicas as { url: string }[])[0]!.url));
    } else {
      const specs = fleetFor(config, o.timeScale).map((s, i) => ({
        ...s,
        port: o.fleetPort ? o.fleetPort + i : 0,
      }));
      fleet = await SimFleet.start(specs).catch((err: NodeJS.ErrnoException) => {
        throw err.code === 'EADDRINUSE'
          ? new Error(
              `a port of the simulated fleet (${o.fleetPort}-${o.fleetPort + specs.length - 1}) is in use: pass --fleet-port to choose others, or 0 for any free ports`,
            )
          : err;
      });
      // The same config a Kong user deploys, pointed at the local fleet.
      const urls = fleet.urls;
      config.replicas = (config.replicas as { url: string }[]).map((r, i) => ({ ...r, url: urls[i]! }));
    }
    const replicas = (config.replicas as { url: string; backend?: string }[]).map((r) => ({
      url: r.url,
      backend: r.backend ?? 'vllm',
    }));
    const cleanup: (() => Promise<void>)[] = [];
    if (fleet) cleanup.push(() => fleet.stop());
    try {
      fleetService.fallbackUrl = replicas[0]!.url;
      // One local node keeps fleet state in process: kong.yml's Redis serves several Kong nodes.
      for (const p of services.flatMap((s) => s.plugins)) {
        const host = (p.config.redis as { host?: string } | undefined)?.host;
        if (host === undefined) continue;
        delete p.config.redis;
        o.log(
          `${p.name}: kong.yml shares fleet state in Redis (${host}) for several Kong nodes; this one-node stack keeps it in process`,
        );
      }
      // The plugin server says it when an instance starts (the first request): said at start here.
      for (const w of configWarningsOf(config)) o.log(w);
      const serverLine = plainLines((line) => o.log(`[plugin-server] ${line}`));
      const pluginServer = await PluginServerProcess.start({
        pluginsDir: o.pluginsDir ?? join(__dirname, '..', 'plugins'),
        onLog: serverLine,
        nodeArgs: o.pluginServerNode?.args,
        env: o.pluginServerNode?.env,
      });
      cleanup.push(() => pluginServer.stop());
      const driver = new KongDriver(pluginServer.socketPath);
      const gateways: LocalGateway[] = [];
      const routes: { prefix: string; gateway: LocalGateway }[] = [];
      for (const s of services) {
        const g = await LocalGateway.create({
          driver,
          plugins: s.plugins,
          serviceUrl: s.fallbackUrl,
          responseBuffering: s.responseBuffering,
          timeouts: s.timeouts,
          bodyBufferBytes: 10 * 1024 * 1024,
          maxBodyBytes: 10 * 1024 * 1024,
          before: o.keyAuth ? keyAuthOf(o.kongYaml, s.name) : undefined,
          onError: (m) => o.log(`[gateway] ${m}`),
        }).catch((err: Error) => {
          throw new Error(`${o.kongYaml}: service "${s.name}": ${err.message}`);
        });
        gateways.push(g);
        for (const p of s.paths) routes.push({ prefix: p, gateway: g });
      }
      const server = new StackServer(routes);
      const url = await server.listen(o.port, o.host);
      return new LocalStack(url, fleet, replicas, services, pluginServer, gateways, server);
    } catch (err) {
      for (const c of cleanup.reverse()) await c().catch(() => undefined);
      throw err;
    }
  }

  /** Bundled Kong plugins in kong.yml that this harness does not run. */
  get notRun(): string[] {
    return [...new Set(this.services.flatMap((s) => s.notRun))];
  }

  /** lora-poller's base path, where the placement page is. */
  get statusPath(): string | undefined {
    const poller = this.services.flatMap((s) => s.plugins).find((p) => p.name === 'lora-poller');
    return poller ? ((poller.config.base_path as string | undefined) ?? '/lora') : undefined;
  }

  /** The plugin server's process id (tests signal it). */
  get pluginServerPid(): number {
    return this.pluginServer.child.pid!;
  }

  /** Successful adapter loads across the fleet so far. */
  loads(): number {
    if (!this.fleet) return 0;
    return this.fleet.replicas.reduce(
      (n, r) => n + r.adapterLog().filter((e) => e.op === 'load' && e.status === 200).length,
      0,
    );
  }

  async stop(): Promise<void> {
    await this.server.close();
    for (const g of this.gateways) await g.close();
    await this.pluginServer.stop();
    await this.fleet?.stop();
  }
}

const BACKENDS = ['vllm', 'llamacpp'];

/** `URL`, `vllm=URL` or `llamacpp=URL`; a bare URL's backend is probed (llama.cpp answers `/lora-adapters`). */
async function userReplicas(specs: string[]): Promise<{ url: string; backend: string }[]> {
  if (specs.length === 0) throw new Error('--replicas needs at least one URL');
  return Promise.all(
    specs.map(async (spec) => {
      // `NAME=` before a URL names a backend (a URL's scheme has no `=` before its `://`).
      const m = /^([^=:/]+)=(.*)$/.exec(spec);
      if (m && !BACKENDS.includes(m[1]!))
        throw new Error(
          `--replicas: unknown backend "${m[1]}" in "${spec}" (backends: ${BACKENDS.join(', ')})`,
        );
      const url = (m ? m[2]! : spec).replace(/\/+$/, '');
      if (!/^https?:\/\/[^/\s]+:\d+$/.test(url))
        throw new Error(`--replicas: "${spec}" is not http(s)://host:port (the router's replica URL form)`);
      if (m) return { url, backend: m[1]! };
      const probe = await fetch(`${url}/lora-adapters`, { signal: AbortSignal.timeout(5000) }).catch(
        (err: Error) => {
          throw new Error(`--replicas: ${url} did not answer (${err.message})`);
        },
      );
      await probe.body?.cancel();
      return { url, backend: probe.ok ? 'llamacpp' : 'vllm' };
    }),
  );
}

/** The base model a replica serves: the `/v1/models` entry that is no adapter (no `parent`). */
async function baseModelOf(url: string): Promise<string> {
  const res = await fetch(`${url}/v1/models`, { signal: AbortSignal.timeout(5000) }).catch((err: Error) => {
    throw new Error(`${url}/v1/models did not answer (${err.message}); pass --base-model`);
  });
  const list = (await res.json().catch(() => undefined)) as
    | { data?: { id: string; parent?: string | null }[] }
    | undefined;
  const base = list?.data?.find((m) => !m.parent)?.id;
  if (!base) throw new Error(`${url}/v1/models names no base model; pass --base-model`);
  return base;
}

/** What the plugin will warn about this lora-router config; one Kong refuses is reported where it is refused. */
function configWarningsOf(config: Record<string, unknown>): string[] {
  try {
    return routerConfigWarnings(parseRouterConfig(structuredClone(config)));
  } catch {
    return [];
  }
}
