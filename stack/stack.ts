import { join } from 'node:path';
import { SimFleet } from '../sim/fleet';
import { KongDriver, PluginServerProcess } from '../test/kong/driver';
import { fleetFor } from './fleet-spec';
import { LocalGateway } from './gateway';
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
  timeScale: number;
  pluginsDir?: string;
  log: (line: string) => void;
}

/**
 * The whole system on one machine: a simulated fleet, the real kong-js-pluginserver on
 * dist/plugins, and a local gateway playing Kong's proxy path for the services in kong.yml.
 */
export class LocalStack {
  private constructor(
    readonly url: string,
    readonly fleet: SimFleet,
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
    const specs = fleetFor(config, o.timeScale).map((s, i) => ({
      ...s,
      port: o.fleetPort ? o.fleetPort + i : 0,
    }));
    const fleet = await SimFleet.start(specs).catch((err: NodeJS.ErrnoException) => {
      throw err.code === 'EADDRINUSE'
        ? new Error(
            `a port of the simulated fleet (${o.fleetPort}-${o.fleetPort + specs.length - 1}) is in use: pass --fleet-port to choose others, or 0 for any free ports`,
          )
        : err;
    });
    const cleanup: (() => Promise<void>)[] = [() => fleet.stop()];
    try {
      // The same config a Kong user deploys, pointed at the local fleet.
      config.replicas = (config.replicas as { url: string }[]).map((r, i) => ({ ...r, url: fleet.urls[i]! }));
      fleetService.fallbackUrl = fleet.urls[0]!;
      // One local node keeps fleet state in process: kong.yml's Redis serves several Kong nodes.
      for (const p of services.flatMap((s) => s.plugins)) {
        const host = (p.config.redis as { host?: string } | undefined)?.host;
        if (host === undefined) continue;
        delete p.config.redis;
        o.log(
          `${p.name}: kong.yml shares fleet state in Redis (${host}) for several Kong nodes; this one-node stack keeps it in process`,
        );
      }
      const pluginServer = await PluginServerProcess.start({
        pluginsDir: o.pluginsDir ?? join(__dirname, '..', 'plugins'),
        onLog: (line) => o.log(`[plugin-server] ${line}`),
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
          bodyBufferBytes: 10 * 1024 * 1024,
          maxBodyBytes: 10 * 1024 * 1024,
          onError: (m) => o.log(`[gateway] ${m}`),
        });
        gateways.push(g);
        for (const p of s.paths) routes.push({ prefix: p, gateway: g });
      }
      const server = new StackServer(routes);
      const url = await server.listen(o.port, o.host);
      return new LocalStack(url, fleet, services, pluginServer, gateways, server);
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

  /** Successful adapter loads across the fleet so far. */
  loads(): number {
    return this.fleet.replicas.reduce(
      (n, r) => n + r.adapterLog().filter((e) => e.op === 'load' && e.status === 200).length,
      0,
    );
  }

  async stop(): Promise<void> {
    await this.server.close();
    for (const g of this.gateways) await g.close();
    await this.pluginServer.stop();
    await this.fleet.stop();
  }
}
