/**
 * Defence in depth (pluginserver/stray-errors.ts): a plugin's stray promise rejection and a Kong
 * connection that goes away before its reply leave the real plugin server serving, and the
 * rejection is logged with the plugin's name. Without it, Node 20 ends the process on either,
 * and Kong restarts it no sooner than a second later, empty (docs/kong.md).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Encoder } from '@msgpack/msgpack';
import { LocalGateway } from '../../stack/gateway';
import { waitFor } from '../../harness/wait';
import { KongDriver, PluginServerProcess } from '../../harness/kong/driver';

/** A plugin that starts work and forgets it: both failures reach no caller. */
const STRAY_PLUGIN = `
class StrayRejection {
  async access() {
    Promise.reject(new Error('forgotten in access'));
    setTimeout(() => Promise.reject(new Error('forgotten in a timer')), 5);
  }
}
module.exports = { Plugin: StrayRejection, Schema: [], Version: '0.0.1', Priority: 1000 };
`;

let dir: string;
let server: PluginServerProcess;
let driver: KongDriver;
let service: http.Server;
let serviceUrl: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'stray-plugins-'));
  writeFileSync(join(dir, 'stray-rejection.js'), STRAY_PLUGIN);
  service = http.createServer((_, res) => res.end('from the service'));
  await new Promise<void>((r) => service.listen(0, '127.0.0.1', r));
  serviceUrl = `http://127.0.0.1:${(service.address() as net.AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((r) => service?.close(r));
  rmSync(dir, { recursive: true, force: true });
});

// A server per test: one that died must not fail the next.
beforeEach(async () => {
  server = await PluginServerProcess.start({ pluginsDir: dir });
  driver = new KongDriver(server.socketPath);
}, 60_000);

afterEach(async () => {
  driver?.close();
  await server?.stop();
});

/** The plugin server's exit and last words, if it died. */
const alive = () =>
  server.exited
    ? `died (${server.child.exitCode ?? server.child.signalCode}):\n${server.log.slice(-12).join('\n')}`
    : 'alive';

it("logs a plugin's stray rejections with its name and keeps serving", async () => {
  const gw = await LocalGateway.create({
    driver,
    plugins: [{ name: 'stray-rejection', config: {} }],
    serviceUrl,
  });
  try {
    for (let i = 0; i < 3; i++) {
      const r = await gw.handle({ path: '/' });
      expect(r.status).toBe(200);
      expect(r.body.toString()).toBe('from the service');
    }
    await waitFor(
      () => server.exited || server.log.filter((l) => l.includes('forgotten in a timer')).length >= 3,
      10_000,
      'the timer rejections logged',
    );
    expect(alive()).toBe('alive');
    const logged = server.log.filter((l) => l.includes('unhandled promise rejection'));
    expect(
      logged.some((l) => l.includes('in plugin stray-rejection') && l.includes('forgotten in access')),
    ).toBe(true);
    // The timer was set inside the plugin's phase: it keeps the plugin's name.
    expect(
      logged.some((l) => l.includes('in plugin stray-rejection') && l.includes('forgotten in a timer')),
    ).toBe(true);
  } finally {
    await gw.close();
  }
});

it('keeps serving when a Kong connection closes before its reply', async () => {
  const call = new Encoder().encode([0, 1, 'plugin.GetPluginInfo', ['stray-rejection']]);
  for (let i = 0; i < 20 && !server.exited; i++) {
    const s = net.connect(server.socketPath);
    s.on('error', () => {});
    await new Promise((r) => s.once('connect', r));
    // The worker goes away with its call under way: the reply is written to a closed socket.
    s.end(call);
    s.destroy();
    await new Promise((r) => setTimeout(r, 20));
  }
  await new Promise((r) => setTimeout(r, 300));
  expect(alive()).toBe('alive');
  expect(await driver.pluginInfo('stray-rejection')).toMatchObject({ Name: 'stray-rejection' });
});
