import { KongDriver, PluginServerProcess } from '../../harness/kong/driver';
import { json, onDemand, startWorld, usePluginServer, vllm } from './world';

let driver: KongDriver;
usePluginServer((_s: PluginServerProcess, d) => {
  driver = d;
});

describe('a configuration the schema passes but the router cannot use', () => {
  let w: Awaited<ReturnType<typeof startWorld>> | undefined;
  afterEach(() => w?.stop());

  it('one replica listed with and without a trailing slash: a clear config error that names fields, not addresses', async () => {
    w = await startWorld(driver, [vllm()], (urls) => onDemand([urls[0]!, `${urls[0]!}/`]));
    const r = await w.chat('a');
    expect(r.status).toBe(500);
    const body = json(r.body);
    expect(body.error).toMatchObject({ type: 'server_error', code: 'router_misconfigured' });
    expect(body.error.message).toContain('config.replicas[2].url: the same replica as config.replicas[1]');
    // Clients never learn where the replicas are.
    expect(body.error.message).not.toContain(new URL(w.fleet.urls[0]!).host);
    expect(w.loads(0)).toEqual([]);
  });

  it('host names compare case-insensitively: LOCALHOST and localhost are one replica', async () => {
    w = await startWorld(driver, [vllm()], (urls) => {
      const port = new URL(urls[0]!).port;
      return onDemand([`http://localhost:${port}`, `http://LOCALHOST:${port}/`]);
    });
    const r = await w.chat('a');
    expect(r.status).toBe(500);
    expect(json(r.body).error.message).toContain(
      'config.replicas[2].url: the same replica as config.replicas[1]',
    );
  });
});
