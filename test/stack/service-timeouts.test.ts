/**
 * The local gateway honours the service's timeouts in kong.yml as Kong does (connect_timeout,
 * write_timeout, read_timeout, ms): a generation longer than read_timeout gets Kong's 504, and
 * a replica that stops reading the request gets it once write_timeout passes between two
 * writes, and a value Kong's schema refuses stops the start, naming the file, the service and
 * the field.
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { KongDriver, PluginServerProcess } from '../../harness/kong/driver';
import { LocalGateway } from '../../stack/gateway';
import { call, chat } from '../helpers/http';
import { usePluginServer } from '../kong/world';
import { kongYamlCopy, startCli, type CliProcess } from './cli-process';

const BASE = 'meta-llama/Llama-3.1-8B-Instruct';

/** kong.yml with one vLLM replica and the fleet service's `fields` changed. */
function config(fields: Record<string, unknown>) {
  return kongYamlCopy((deck) => {
    const service = deck.services[0];
    Object.assign(service, fields);
    const router = service.plugins.find((p: { name: string }) => p.name === 'lora-router').config;
    router.replicas = router.replicas.slice(0, 1);
  });
}

describe("the service's read_timeout", () => {
  let cli: CliProcess;
  let done: () => void;
  beforeAll(async () => {
    const c = config({ read_timeout: 1000 });
    done = c.done;
    cli = startCli(['--port', '0', '--fleet-port', '0', '--config', c.file]);
    await cli.until(/Ctrl-C stops everything/);
  });
  afterAll(async () => {
    await cli.stop();
    done();
  });

  it("answers 504 with Kong's text when the replica takes longer to answer (3000 tokens at 20 ms each)", async () => {
    const gw = cli.out().match(/gateway\s+(http:\/\/\S+)/)![1]!;
    const slow = await call(gw, '/v1/chat/completions', { body: chat(BASE, 3000), timeoutMs: 20_000 });
    expect([slow.status, slow.json().message]).toEqual([504, 'The upstream server is timing out']);
    await cli.until(/\[gateway\] error: POST \/v1\/chat\/completions: 504/, 5000);
  });
});

it.each([
  ['read_timeout', 0],
  ['connect_timeout', '3s'],
  ['write_timeout', 2 ** 31],
])('refuses %s: %j, naming the file, the service and the field', async (field, value) => {
  const c = config({ [field]: value });
  const cli = startCli(['--port', '0', '--fleet-port', '0', '--config', c.file]);
  try {
    expect(await cli.exited(20_000)).toBe(1);
    expect(cli.out()).toContain(
      `${c.file}: service "llm-fleet": ${field} must be an integer from 1 to 2147483646 (milliseconds), got ${JSON.stringify(value)}`,
    );
  } finally {
    await cli.stop();
    c.done();
  }
});

describe("the service's write_timeout", () => {
  let driver: KongDriver;
  usePluginServer((_s: PluginServerProcess, d) => {
    driver = d;
  });

  it('answers 504 when the replica stops reading the request body (nginx proxy_send_timeout)', async () => {
    // Accepts, never reads: once the socket buffers are full, the gateway's next write waits.
    const sockets = new Set<net.Socket>();
    const replica = net.createServer((s) => {
      sockets.add(s);
      s.pause();
    });
    await new Promise<void>((r) => replica.listen(0, '127.0.0.1', () => r()));
    const errors: string[] = [];
    const gateway = await LocalGateway.create({
      driver,
      plugins: [],
      serviceUrl: `http://127.0.0.1:${(replica.address() as AddressInfo).port}`,
      timeouts: { write_timeout: 300, read_timeout: 120_000 },
      onError: (m) => errors.push(m),
    });
    try {
      const reply = await gateway.handle({
        method: 'POST',
        path: '/v1/chat/completions',
        headers: { 'content-type': 'application/json' },
        // Far more than loopback's socket buffers hold.
        body: Buffer.alloc(64 * 1024 * 1024, 'x'),
      });
      expect([reply.status, JSON.parse(reply.body.toString()).message]).toEqual([
        504,
        'The upstream server is timing out',
      ]);
      expect(errors).toEqual([
        'error: POST /v1/chat/completions: 504 write_timeout (300 ms) passed sending the request',
      ]);
    } finally {
      for (const s of sockets) s.destroy();
      await gateway.close();
      await new Promise((r) => replica.close(r));
    }
  });
});
