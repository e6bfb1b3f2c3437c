/**
 * What a client learns when something behind the gateway fails: a fixed message, never a
 * replica's address or its error text (on real vLLM a load error can name storage paths).
 * The operator gets the detail in the log. Through the real plugin server and the local gateway.
 */
import { KongDriver, PluginServerProcess } from '../../harness/kong/driver';
import { BASE, PLUGINS_DIR, json, onDemand, startWorld, vllm } from '../kong/world';

let server: PluginServerProcess;
let driver: KongDriver;
const serverLog: string[] = [];

beforeAll(async () => {
  server = await PluginServerProcess.start({ pluginsDir: PLUGINS_DIR, onLog: (l) => serverLog.push(l) });
  driver = new KongDriver(server.socketPath);
});
afterAll(async () => {
  driver?.close();
  await server?.stop();
});

it("answers a failed proxy attempt with Kong's own 502 body, the detail only in the gateway log", async () => {
  const gatewayLog: string[] = [];
  const w = await startWorld(
    driver,
    [vllm()],
    (u) => ({ replicas: u.map((url) => ({ url })), base_model: BASE }),
    { onError: (m) => gatewayLog.push(m) },
  );
  try {
    expect((await w.chat(BASE)).status).toBe(200);
    await w.fleet.replicas[0]!.fault({ kind: 'kill' });
    const r = await w.chat(BASE);
    expect(r.status).toBe(502);
    // Kong/kong 3.9.3 kong/error_handlers.lua BODIES[502], kong/tools/http.lua JSON error template.
    const body = json(r.body);
    expect(body.message).toBe('An invalid response was received from the upstream server');
    expect(typeof body.request_id).toBe('string');
    expect(r.body.toString()).not.toMatch(/127\.0\.0\.1|ECONNREFUSED|:\d{4,5}/);
    expect(gatewayLog.join('\n')).toMatch(/ECONNREFUSED/);
  } finally {
    await w.stop();
  }
});

it.each([
  ['an error answer (500)', 500, 'adapter_load_failed', 502],
  ['a refusal (400)', 400, 'adapter_rejected', 400],
])(
  "a load failure, %s: the client's message is fixed, the replica's text goes to the log",
  async (_what, status, code, clientStatus) => {
    const w = await startWorld(driver, [vllm()], (u) => onDemand(u, { backoff_base_ms: 30000 }));
    try {
      const mark = serverLog.length;
      await w.fleet.replicas[0]!.fault({ kind: 'failLoads', count: 5, status });
      const name = `flaky-${status}`;
      const a = await w.chat(name);
      expect([a.status, json(a.body).error.code]).toEqual([clientStatus, code]);
      // The simulator's error text stands for the replica's own (paths on real vLLM).
      expect(json(a.body).error.message).toMatch(new RegExp(`'${name}'`));
      expect(a.body.toString()).not.toMatch(/simulated fault|127\.0\.0\.1/);
      if (code === 'adapter_load_failed') {
        const b = await w.chat(name);
        expect(json(b.body).error.code).toBe('adapter_load_backoff');
        expect(b.body.toString()).not.toMatch(/simulated fault|127\.0\.0\.1/);
      }
      expect(serverLog.slice(mark).join('\n')).toMatch(/simulated fault/);
    } finally {
      await w.stop();
    }
  },
);
