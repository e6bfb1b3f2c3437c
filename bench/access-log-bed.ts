import { Plugin } from '../plugins/lora-router';
import type { RouterService } from '../src/router/router';
import { SimFleet } from '../sim/fleet';
import { chatBody } from './overhead';

/**
 * lora-router's access + log as the plugin server runs them for the request-path goal (1 KB chat
 * body, adapter resident, one simulated replica polled over loopback), in process: the plugin's
 * own class against a PDK whose calls answer at once, so what is counted is the plugin glue and
 * the routing core, without msgpack or the socket. Each call returns the decision's stage.
 */
export async function accessLogBed(): Promise<{ accessLog: () => Promise<string>; stop: () => void }> {
  const fleet = await SimFleet.start([
    { staticAdapters: [{ name: 'bench-adapter', path: '/adapters/bench-adapter' }], maxModelLen: 1 << 20 },
  ]);
  const plugin = new Plugin({
    replicas: [{ url: fleet.urls[0] }],
    base_model: 'base',
    max_loaded_adapters: 4,
  });
  const body = chatBody(1024);
  let shared: Record<string, unknown> = {};
  const now = <T>(v: T) => Promise.resolve(v);
  // The calls lora-router makes for a resident adapter (plugins/lora-router.ts), and the two it may.
  const kong = {
    request: { getPath: () => now('/v1/chat/completions'), getRawBody: () => now(body) },
    ctx: {
      shared: {
        set: (k: string, v: unknown) => now(void (shared[k] = v)),
        get: (k: string) => now(shared[k]),
      },
    },
    service: { setTarget: () => now(undefined), request: {} },
    response: { getStatus: () => now(200), getSource: () => now('service') },
  };
  const pdk = kong as unknown as Parameters<InstanceType<typeof Plugin>['access']>[0];
  const accessLog = async () => {
    shared = {};
    await plugin.access(pdk);
    await plugin.log(pdk);
    return String((shared.lora_router as { stage?: string } | undefined)?.stage);
  };
  const service = (plugin as unknown as { service: RouterService }).service;
  return {
    accessLog,
    stop: () => {
      service.runtime.stop();
      void fleet.stop();
    },
  };
}
