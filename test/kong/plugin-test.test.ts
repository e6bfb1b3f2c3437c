/**
 * kong-pdk's own in-process harness (PluginTest), where it helps: lora-poller answers its route
 * with one PDK read and an exit. lora-router is not run here: PluginTest has no kong.ctx mocks
 * and an unmocked call hangs, so the real plugin server (plugins.test.ts) covers it.
 */
const { PluginTest, Request } = require('kong-pdk/plugin_test.js');
import * as poller from '../../plugins/lora-poller';
import { sharedRuntime } from '../../src/runtime-registry';

afterAll(() => sharedRuntime().stop());

async function run(path: string, config: Record<string, unknown> = {}) {
  const t = new PluginTest(new Request().useURL(`http://gateway.local${path}`).useMethod('GET'));
  await t.Run(poller, config);
  return { status: t.response.status as number, body: Buffer.from(t.response.body).toString('utf8') };
}

describe('lora-poller under kong-pdk PluginTest', () => {
  it('answers .../status with the fleet as JSON', async () => {
    const r = await run('/lora/status');
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body)).toMatchObject({ inFlight: 0, replicas: [], poller: { running: true } });
  });

  it('answers .../metrics with Prometheus text', async () => {
    const r = await run('/lora/metrics');
    expect(r.body).toMatch(/# TYPE lora_router_decisions_total counter/);
  });

  it('serves the page at the route itself, and 404 for what is switched off', async () => {
    expect((await run('/lora')).body).toMatch(/<title>kong-lora-router · placement<\/title>/);
    const off = await run('/lora', { endpoints: ['status'] });
    expect(off.status).toBe(404);
    expect(JSON.parse(off.body).error.code).toBe('not_found');
  });
});
