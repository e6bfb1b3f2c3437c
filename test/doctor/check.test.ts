import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { ReplicaHttp } from '../../src/backends/http';
import { checkReplica } from '../../src/doctor/check';
import { fleetFromKongConfig, fleetFromUrls } from '../../src/doctor/fleet-config';

/**
 * The preflight check alone, against a loopback server whose answers each test sets: vLLM's
 * `/version`, and `/metrics` as one or several API server processes write it (the simulator
 * plays both too: test/doctor/doctor-cli.test.ts).
 */
describe('checkReplica', () => {
  const now = 1_780_000_000;
  let server: http.Server;
  let url: string;
  let metrics = '';
  const client = new ReplicaHttp();
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      const send = (status: number, body: string) => res.writeHead(status).end(body);
      if (req.url === '/v1/models')
        return send(200, JSON.stringify({ data: [{ id: 'base', parent: null, max_model_len: 8192 }] }));
      if (req.url === '/version') return send(200, JSON.stringify({ version: '0.11.0' }));
      if (req.url === '/metrics') return send(200, metrics);
      if (req.url === '/v1/load_lora_adapter') return send(405, '{"detail":"Method Not Allowed"}');
      send(404, '{"detail":"Not Found"}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await client.close();
    await new Promise((r) => server.close(r));
  });
  const check = () =>
    checkReplica(client, url, {
      backend: 'vllm',
      timeoutMs: 2000,
      nowUnix: now,
      now: () => 0,
      maxLoadedAdapters: 4,
    });

  it('reads the version and tells one API server', async () => {
    metrics = `vllm:lora_requests_info{max_lora="4",running_lora_adapters="",waiting_lora_adapters=""} ${now - 5}\n`;
    const c = await check();
    expect(c).toMatchObject({ version: '0.11.0', maxLoras: 4, runtimeLora: true, fit: true });
    expect(c.apiServers).toBeUndefined();
  });

  it('tells several API servers from timestamps summed over the processes', async () => {
    metrics = `vllm:lora_requests_info{max_lora="4",running_lora_adapters="",waiting_lora_adapters=""} ${3 * (now - 5)}\n`;
    const c = await check();
    expect(c.apiServers).toBe(3);
    expect(c.findings.some((f) => f.level === 'warn' && /3 API server processes/.test(f.text))).toBe(true);
  });

  it('sees prefix caching off, and computed tokens where exported', async () => {
    metrics =
      'vllm:cache_config_info{block_size="16",enable_prefix_caching="False",num_gpu_blocks="100"} 1.0\n' +
      'vllm:request_prefill_kv_computed_tokens_sum{engine="0"} 10.0\n';
    const c = await check();
    expect(c.prefixCaching).toBe(false);
    expect(c.signals.find((s) => s.id === 'computed_tokens')).toMatchObject({ exported: true });
    expect(c.signals.find((s) => s.id === 'cache_config_info')).toMatchObject({ exported: true });
    expect(c.signals.find((s) => s.id === 'queue')).toMatchObject({ exported: false });
  });
});

describe('the fleet to check', () => {
  it("reads the repository's kong.yml: every lora-router replica with its max_loaded_adapters", () => {
    const doc = parseYaml(readFileSync(join(__dirname, '..', '..', 'kong.yml'), 'utf8'));
    const fleet = fleetFromKongConfig(doc);
    expect(fleet.targets).toHaveLength(5);
    expect(fleet.targets[4]).toEqual({ url: 'http://fleet:8104', backend: 'llamacpp', maxLoadedAdapters: 4 });
    expect(fleet.targets[0]).toEqual({ url: 'http://fleet:8100', backend: 'vllm', maxLoadedAdapters: 4 });
    expect(fleet.adapterPath('sql-lora')).toBe('/adapters/sql-lora');
    expect(fleet.adapterPath('other')).toBe('/adapters/other');
  });

  it('refuses a configuration without lora-router', () => {
    expect(() => fleetFromKongConfig({ services: [] })).toThrow('no lora-router plugin');
  });

  it('reads --replicas, a backend written before a URL', () => {
    expect(fleetFromUrls('http://a:1/, llamacpp=http://b:2', 3)).toEqual([
      { url: 'http://a:1', maxLoadedAdapters: 3 },
      { url: 'http://b:2', backend: 'llamacpp', maxLoadedAdapters: 3 },
    ]);
  });
});
