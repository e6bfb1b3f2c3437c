/**
 * The lost unload answer over real HTTP on loopback: a vLLM stand-in that drops the connection
 * right after it unloaded (or loaded) the adapter. The router's HTTP client reports it as a failed
 * call (BackendError 'connect'); what the fleet state says afterwards is the replica's registry.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AdapterManager } from '../../src/adapters/manager';
import { HttpReplicaApi } from '../../src/backends/http-replica-api';
import { systemClock } from '../../src/clock';
import { MemoryFleetStore } from '../../src/fleet/memory-store';
import { silentLogger } from '../../src/log';
import { adapterPolicy as policy } from '../helpers/adapter-policy';

/** vLLM's LoRA routes and `/v1/models`; `/metrics` without the LoRA gauge (the leases decide). */
class Vllm {
  held = new Set<string>();
  /** The next unloads (loads) whose connection is dropped once the replica did them. */
  dropUnloads = 0;
  dropLoads = 0;
  private server: Server | undefined;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const name = body ? (JSON.parse(body) as { lora_name: string }).lora_name : '';
        if (req.method === 'GET' && req.url === '/v1/models') {
          const data = [
            { id: 'base', parent: null },
            ...[...this.held].map((id) => ({ id, parent: 'base', root: `/a/${id}` })),
          ];
          res
            .writeHead(200, { 'content-type': 'application/json' })
            .end(JSON.stringify({ object: 'list', data }));
        } else if (req.method === 'GET' && req.url === '/metrics') {
          res
            .writeHead(200, { 'content-type': 'text/plain' })
            .end('vllm:num_requests_running{model_name="base"} 0.0\n');
        } else if (req.url === '/v1/load_lora_adapter') {
          this.held.add(name);
          if (this.dropLoads > 0 && this.dropLoads--) return req.socket.destroy();
          res.writeHead(200).end(`Success: LoRA adapter '${name}' added successfully.`);
        } else if (req.url === '/v1/unload_lora_adapter') {
          this.held.delete(name);
          if (this.dropUnloads > 0 && this.dropUnloads--) return req.socket.destroy();
          res.writeHead(200).end(`Success: LoRA adapter '${name}' removed successfully.`);
        } else res.writeHead(404).end('{"detail":"Not Found"}');
      });
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  stop(): Promise<void> {
    return new Promise((r) => this.server?.close(() => r()) ?? r());
  }
}

describe('over HTTP: a connection dropped after the replica did the call', () => {
  let vllm: Vllm;
  let api: HttpReplicaApi;
  beforeEach(async () => {
    vllm = new Vllm();
    await vllm.start();
    api = new HttpReplicaApi();
  });
  afterEach(async () => {
    await api.close();
    await vllm.stop();
  });

  async function setup() {
    const store = new MemoryFleetStore();
    await store.upsertReplica({ url: vllm.url, backend: 'vllm', priority: 0 });
    const mgr = new AdapterManager(store, api, systemClock, silentLogger);
    // Bounds a loaded machine cannot miss: nothing here waits for room.
    const bounds = policy({ queueTimeoutMs: 5000, loadTimeoutMs: 5000 });
    const ensure = (name: string) => mgr.ensure(vllm.url, { name, path: `/a/${name}` }, bounds);
    return { store, ensure };
  }

  it('an unload: the next request for the adapter is not a hit on a replica without it', async () => {
    const { ensure } = await setup();
    expect(await ensure('a')).toBe('loaded');
    expect(await ensure('b')).toBe('loaded');
    vllm.dropUnloads = 1;
    expect(await ensure('c')).toBe('loaded'); // a unloaded, its answer lost
    expect(vllm.held.has('a')).toBe(false);
    const outcome = await ensure('a');
    expect([outcome, vllm.held.has('a')]).toEqual(['loaded', true]);
  });

  it('a load: its request is served by it, not failed', async () => {
    const { ensure, store } = await setup();
    vllm.dropLoads = 1;
    expect(await ensure('a')).toBe('loaded');
    expect((await store.residents(vllm.url)).map((r) => [r.name, r.state])).toEqual([['a', 'loaded']]);
  });
});
