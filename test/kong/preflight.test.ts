/**
 * lora-poller runs the preflight check (what `kong-lora-router doctor` prints) once per replica
 * when it first polls it: the summary in the plugin server's log, and on `/lora/status`. Through
 * the real plugin server over its socket, to simulated replicas over loopback HTTP.
 */
import { waitFor } from '../../harness/wait';
import { KongDriver, PluginServerProcess } from '../../harness/kong/driver';
import { onDemand, startWorld, usePluginServer, vllm } from './world';

let driver: KongDriver;
let server: PluginServerProcess;
usePluginServer((s, d) => {
  server = s;
  driver = d;
});

describe("lora-poller's preflight summary", () => {
  let w: Awaited<ReturnType<typeof startWorld>> | undefined;
  afterEach(() => w?.stop());

  it('logs each replica once at start and carries it on /lora/status', async () => {
    w = await startWorld(
      driver,
      [
        vllm({ engine: { maxLoras: 2 } }),
        vllm({ runtimeLoading: false }),
        { backend: 'llamacpp', llamaMetrics: false },
      ],
      (u) => ({
        ...onDemand(u, { max_loaded_adapters: 4 }),
        replicas: [{ url: u[0] }, { url: u[1] }, { url: u[2], backend: 'llamacpp' }],
      }),
    );
    const [v, off, llama] = w.fleet.urls as [string, string, string];
    type Replica = {
      url: string;
      preflight: {
        fit: boolean;
        backend: string;
        runtimeLora?: boolean;
        maxLoras?: number;
        maxLoadedAdapters?: number;
        signals: { id: string; exported: boolean; without?: string }[];
      } | null;
    };
    let replicas: Replica[] = [];
    // Lora-router's instance registers the replicas with its first request.
    expect((await w.chat('meta-llama/Llama-3.1-8B-Instruct')).status).toBe(200);
    await waitFor(async () => {
      await new Promise((r) => setTimeout(r, 100));
      replicas = (await w!.statusJson()).replicas as Replica[];
      return replicas.length === 3 && replicas.every((r) => r.preflight !== null);
    }, 10_000);
    const of = (url: string) => replicas.find((r) => r.url === url)!.preflight!;
    expect(of(v)).toMatchObject({
      fit: true,
      backend: 'vllm',
      runtimeLora: true,
      maxLoras: 2,
      maxLoadedAdapters: 4,
    });
    expect(of(off)).toMatchObject({ fit: false, runtimeLora: false });
    expect(of(llama)).toMatchObject({ fit: true, backend: 'llamacpp' });
    expect(of(llama).signals.find((s) => s.id === 'queue')).toMatchObject({ exported: false });

    // Once per replica, however many polls (50 ms apart) have run since.
    await new Promise((r) => setTimeout(r, 300));
    for (const url of [v, off, llama]) {
      const said = server.log.filter((l) => l.includes(`preflight of replica ${url}:`));
      expect(said).toHaveLength(1);
    }
    expect(server.log.find((l) => l.includes(`preflight of replica ${off}:`))).toMatch(/warn: .*UNFIT/);
    expect(server.log.some((l) => /max_loaded_adapters 4 > --max-loras 2/.test(l))).toBe(true);
    // The check changed nothing on the replicas.
    for (const r of w.fleet.replicas) expect(r.adapterLog()).toEqual([]);
  });
});
