import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { waitFor } from '../../harness/wait';
import { LocalGateway, type GatewayOptions } from '../../stack/gateway';
import { SimFleet } from '../../sim/fleet';
import type { ReplicaOptions } from '../../sim/http/replica';
import { KongDriver, PluginServerProcess, type PluginInfo } from '../../harness/kong/driver';

export const PLUGINS_DIR = join(__dirname, '..', '..', 'dist', 'plugins');
export const BASE = 'meta-llama/Llama-3.1-8B-Instruct';

/** A JSON body (a response, a status page) from its bytes. */
export const json = (b: Buffer) => JSON.parse(b.toString('utf8'));

/** What the plugin server reports of the plugins in `dir` (`--dump-all-plugins`, as Kong asks at start). */
export function dumpPlugins(dir = PLUGINS_DIR): PluginInfo[] {
  return JSON.parse(
    execFileSync(process.execPath, [PluginServerProcess.binary(), '-d', dir, '--dump-all-plugins'], {
      timeout: 20_000,
    }).toString(),
  );
}

/** A chat body whose prompt is about `tokens` tokens (4 characters a token). */
export const chatBody = (model: string, tokens: number, maxTokens: number) =>
  Buffer.from(
    JSON.stringify({
      model,
      messages: [{ role: 'user', content: 'lorem ipsum '.repeat(Math.ceil(tokens / 3)) }],
      max_tokens: maxTokens,
    }),
  );

/** A lora-router config loading adapters on demand from /adapters/{name}, two per replica. */
export const onDemand = (urls: string[], over: Record<string, unknown> = {}) => ({
  replicas: urls.map((url) => ({ url })),
  base_model: BASE,
  adapter_path_template: '/adapters/{name}',
  max_loaded_adapters: 2,
  ...over,
});

/** One plugin-server process for a test file, as one Kong node has. */
export async function startPluginServer(): Promise<{ server: PluginServerProcess; driver: KongDriver }> {
  const server = await PluginServerProcess.start({ pluginsDir: PLUGINS_DIR });
  return { server, driver: new KongDriver(server.socketPath) };
}

/** Starts one plugin server for the test file (hands it to `bind`) and stops it after. */
export function usePluginServer(bind: (server: PluginServerProcess, driver: KongDriver) => void): void {
  let started: { server: PluginServerProcess; driver: KongDriver } | undefined;
  beforeAll(async () => {
    started = await startPluginServer();
    bind(started.server, started.driver);
  });
  afterAll(async () => {
    started?.driver.close();
    await started?.server.stop();
  });
}

/** A simulated fleet behind a service whose route carries lora-router, plus a status route with lora-poller. */
export async function startWorld(
  driver: KongDriver,
  specs: ReplicaOptions[],
  routerConfig: (urls: string[]) => Record<string, unknown>,
  extra: Partial<GatewayOptions> = {},
  pollIntervalMs = 50,
  /** lora-poller's `timeout_ms`: two polls in a row past it mark the replica down. */
  pollTimeoutMs = 500,
) {
  const fleet = await SimFleet.start(specs);
  const service = await LocalGateway.create({
    driver,
    plugins: [{ name: 'lora-router', config: routerConfig(fleet.urls) }],
    serviceUrl: fleet.urls[0]!,
    ...extra,
  }).catch(async (err: unknown) => {
    await fleet.stop(); // a config Kong refuses: nothing may outlive the test
    throw err;
  });
  const status = await LocalGateway.create({
    driver,
    plugins: [
      { name: 'lora-poller', config: { poll_interval_ms: pollIntervalMs, timeout_ms: pollTimeoutMs } },
    ],
    serviceUrl: 'http://127.0.0.1:9',
  });
  const chat = (model: string, maxTokens = 2, extra: Record<string, unknown> = {}) =>
    service.handle({
      path: '/v1/chat/completions',
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(
        JSON.stringify({
          model,
          messages: [{ role: 'user', content: 'hi' }],
          max_tokens: maxTokens,
          ...extra,
        }),
      ),
    });
  const loads = (i: number, name?: string) =>
    fleet.replicas[i]!.adapterLog().filter((e) => e.op === 'load' && (name === undefined || e.name === name));
  const statusJson = async () =>
    JSON.parse((await status.handle({ method: 'GET', path: '/lora/status' })).body.toString());
  const stop = async () => {
    await service.close();
    await status.close();
    await fleet.stop();
  };
  /**
   * Waits until the poller's count holds still for 1 s, and returns it: the polls a first request
   * started (stale views, the replica's word around its load) may still run on a loaded machine,
   * and one landing among a test's failures would mark the replica up again.
   */
  const pollsHoldingStill = async (): Promise<number> => {
    let polls = (await statusJson()).poller.polls as number;
    await waitFor(
      async () => {
        await new Promise((r) => setTimeout(r, 1000));
        const now = (await statusJson()).poller.polls as number;
        const still = now === polls;
        polls = now;
        return still;
      },
      15_000,
      'polls holding still',
    );
    return polls;
  };
  return { fleet, service, status, chat, loads, statusJson, pollsHoldingStill, stop };
}

export const vllm = (over: Partial<ReplicaOptions> = {}): ReplicaOptions => ({
  adapterDirs: ['/adapters'],
  timeScale: 10,
  ...over,
  engine: { loadBaseMs: 1000, ...over.engine },
});
