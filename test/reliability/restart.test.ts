/**
 * The plugin server killed and restarted mid-run, as Kong restarts it: fleet state is rebuilt
 * from the replicas' registries on the first request, no adapter is loaded twice, the adapter
 * limit holds, and requests resume.
 */
import { PluginServerProcess, KongDriver } from '../../harness/kong/driver';
import { BASE, startWorld, vllm, PLUGINS_DIR } from '../kong/world';
import { waitFor } from '../../harness/wait';

it('rebuilds residency after a plugin-server restart without reloading anything, and keeps the limit', async () => {
  let server = await PluginServerProcess.start({ pluginsDir: PLUGINS_DIR });
  const driver = new KongDriver(server.socketPath);
  const w = await startWorld(
    driver,
    [vllm({ staticAdapters: [{ name: 'boot', path: '/models/boot' }] })],
    (u) => ({
      replicas: u.map((url) => ({ url })),
      base_model: BASE,
      adapter_path_template: '/adapters/{name}',
      max_loaded_adapters: 2,
    }),
  );
  try {
    const replica = w.fleet.replicas[0]!;
    expect((await w.chat('a')).status).toBe(200);
    expect((await w.chat('b')).status).toBe(200);
    // A request in flight when the server dies: Kong lets it through to the service.
    const inFlight = w.chat('a', 200);
    await waitFor(() => replica.engine.inFlight('a') === 1);
    server = await server.restart();
    expect(server.socketPath).toBe(driver.socketPath);
    expect([200, 502]).toContain((await inFlight).status);

    // The new process starts empty: the first request rebuilds residency from /v1/models.
    const again = await w.chat('a');
    expect(again.status).toBe(200);
    const s = await w.statusJson();
    const adapters = Object.fromEntries(
      s.replicas[0].adapters.map((a: { name: string; state: string }) => [a.name, a.state]),
    );
    // a and b were loaded by the router before the restart: managed, so evictable; boot is start-up.
    expect(adapters).toEqual({ a: 'loaded', b: 'loaded', boot: 'static' });
    expect(
      replica
        .adapterLog()
        .filter((e) => e.op === 'load')
        .map((e) => e.name),
    ).toEqual(['a', 'b']);

    // A third adapter must evict one of them (limit 2), never boot, and load exactly once.
    expect((await w.chat('c')).status).toBe(200);
    expect(
      replica
        .adapterLog()
        .filter((e) => e.op === 'load')
        .map((e) => e.name),
    ).toEqual(['a', 'b', 'c']);
    const unloads = replica.adapterLog().filter((e) => e.op === 'unload');
    expect(unloads).toHaveLength(1);
    expect(['a', 'b']).toContain(unloads[0]!.name);
    expect(unloads[0]!.inFlight).toBe(0);
    expect(replica.registered().filter((n) => n !== 'boot')).toHaveLength(2);
    expect((await w.statusJson()).inFlight).toBe(0);
  } finally {
    driver.close();
    await server.stop();
    await w.stop();
  }
});
