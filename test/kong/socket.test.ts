/**
 * The plugin server's socket, read as a msgpack-RPC peer must read it (pluginserver/socket.ts):
 * messages are cut from the byte stream wherever writes split or join them; bytes that are no
 * request close their connection, never the process, which serves every plugin for every Kong
 * worker of the node; a request for something the server does not do gets an RPC error reply.
 */
import { Encoder } from '@msgpack/msgpack';
import { waitFor } from '../../harness/wait';
import { KongDriver, PluginServerProcess } from '../../harness/kong/driver';
import { exchange, request } from './raw-socket';
import { PLUGINS_DIR } from './world';

/** What `curl --unix-socket <socket> http://localhost/` writes. */
const CURL = Buffer.from(
  'GET / HTTP/1.1\r\nHost: localhost\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n',
);

let server: PluginServerProcess;
let driver: KongDriver;
let pid: number;

// A server per test: one that died must not fail the next.
beforeEach(async () => {
  server = await PluginServerProcess.start({ pluginsDir: PLUGINS_DIR });
  driver = new KongDriver(server.socketPath);
  pid = server.child.pid!;
}, 60_000);

afterEach(async () => {
  driver?.close();
  await server?.stop();
});

/** The same process still answers Kong: its exit and last words if not. */
async function stillServing(): Promise<void> {
  const answer = await driver.call('plugin.GetPluginInfo', 'lora-router').catch(async (err: unknown) => {
    await waitFor(() => server.exited, 2000, 'the plugin server to exit after failing a call').catch(
      () => {},
    );
    const how = server.exited
      ? `died (${server.child.exitCode ?? server.child.signalCode})`
      : 'failed a call';
    throw new Error(`plugin server ${how}: ${String(err)}\n${server.log.slice(-12).join('\n')}`);
  });
  expect(answer).toMatchObject({ Name: 'lora-router' });
  expect(server.child.pid).toBe(pid);
}

const info = (msgid: number, name = 'lora-router') => request(msgid, 'plugin.GetPluginInfo', name);

it("closes the connection curl's HTTP request came on, and keeps serving", async () => {
  const r = await exchange(server.socketPath, [CURL]);
  expect(r.closedByServer).toBe(true);
  expect(r.replies).toEqual([]);
  await stillServing();
});

it('answers two requests written at once, each with its own msgid', async () => {
  const r = await exchange(server.socketPath, [Buffer.concat([info(1), info(2, 'lora-poller')])], {
    replies: 2,
  });
  await stillServing();
  const byId = new Map(r.replies.map((m) => [m[1], m]));
  expect(byId.get(1)).toMatchObject([1, 1, null, { Name: 'lora-router' }]);
  expect(byId.get(2)).toMatchObject([1, 2, null, { Name: 'lora-poller' }]);
});

it('answers a request split over writes once it is whole, and one whose write also starts the next', async () => {
  const a = info(1);
  const b = info(2, 'lora-poller');
  const c = info(3);
  const r = await exchange(
    server.socketPath,
    [a.subarray(0, 1), a.subarray(1, 9), Buffer.concat([a.subarray(9), b.subarray(0, 4)]), b.subarray(4), c],
    { replies: 3 },
  );
  await stillServing();
  expect(r.replies.map((m) => [m[1], (m[3] as { Name: string }).Name]).sort()).toEqual([
    [1, 'lora-router'],
    [2, 'lora-poller'],
    [3, 'lora-router'],
  ]);
});

it('answers an RPC error to an unknown method, a bad instance id or an unknown event', async () => {
  const calls: [string, unknown, RegExp][] = [
    ['plugin.NoSuchMethod', null, /^method NoSuchMethod not implemented$/],
    ['status.GetStatus', null, /^RPC for status is not supported$/],
    // kong-pdk's Server methods that are not RPC methods.
    ['plugin.loadPlugins', null, /^method loadPlugins not implemented$/],
    ['plugin.constructor', null, /^method constructor not implemented$/],
    ['plugin.close', null, /^method close not implemented$/],
    // Kong expects "no plugin instance" (mp_rpc.lua `Rpc:handle_event`) and starts a new one.
    ['plugin.HandleEvent', { InstanceId: 12345, EventName: 'access' }, /^no plugin instance #12345$/],
    ['plugin.HandleEvent', null, /./],
    ['plugin.CloseInstance', 'x', /^no plugin instance #x$/],
    ['plugin.Step', { EventId: 999, Data: 1 }, /^event id 999 not found$/],
    ['plugin.StartInstance', { Name: 'lora-router', Config: '{not json' }, /JSON/],
  ];
  for (const [i, [method, arg, error]] of calls.entries()) {
    const r = await exchange(server.socketPath, [request(i, method, arg)], { replies: 1 });
    expect([method, r.replies.length]).toEqual([method, 1]);
    const [type, msgid, err, result] = r.replies[0]!;
    expect([method, type, msgid, result]).toEqual([method, 1, i, null]);
    expect(String(err)).toMatch(error);
  }
  await stillServing();
});

it('closes a connection whose message is not a request, and keeps serving', async () => {
  const e = new Encoder();
  const notRequests: Buffer[] = [
    Buffer.from(e.encode([0, 1, 42, []])), // method not a string
    Buffer.from(e.encode(42)),
    Buffer.from(e.encode({ a: 1 })),
    Buffer.from(e.encode([1, 1, null, 'a reply, not a request'])),
    Buffer.from(e.encode([0, 1, 'plugin.GetStatus', 'args not an array'])),
    Buffer.from(e.encode([0, -1, 'plugin.GetStatus', []])), // msgid not a uint32
    Buffer.from([0xc1]), // never used in msgpack
    Buffer.concat([Buffer.alloc(200_000, 0x91), Buffer.from([0xc0])]), // 200,000 nested arrays
  ];
  for (const bytes of notRequests) {
    const r = await exchange(server.socketPath, [bytes]);
    expect([bytes.subarray(0, 8).toString('hex'), r.closedByServer, r.replies]).toEqual([
      bytes.subarray(0, 8).toString('hex'),
      true,
      [],
    ]);
  }
  await stillServing();
});

it('closes a connection that announces a message larger than any Kong sends', async () => {
  const oversized = [
    Buffer.from([0xc6, 0xff, 0xff, 0xff, 0xff, 1, 2, 3]), // bin 32, 4 GiB
    Buffer.from([0xdb, 0x80, 0x00, 0x00, 0x00, 0x61]), // str 32, 2 GiB
    Buffer.from([0x94, 0x00, 0x01, 0xc9, 0xff, 0xff, 0xff, 0xf0, 0x01]), // ext 32 inside a request
  ];
  for (const bytes of oversized) {
    const r = await exchange(server.socketPath, [bytes], { waitMs: 5000 });
    expect([bytes.toString('hex'), r.closedByServer]).toEqual([bytes.toString('hex'), true]);
  }
  await stillServing();
});

it('logs each closed connection once, at most a few lines a minute', async () => {
  for (let i = 0; i < 20; i++) expect((await exchange(server.socketPath, [CURL])).closedByServer).toBe(true);
  await stillServing();
  const closed = () => server.log.filter((l) => l.includes('closed a connection to its socket'));
  await waitFor(() => closed().length > 0, 5000, 'a closed connection logged');
  // Each names why, and shows the bytes an operator can recognise.
  expect(closed()[0]).toContain('GET / HTTP/1.1');
  expect(closed().length).toBeLessThanOrEqual(5);
});
