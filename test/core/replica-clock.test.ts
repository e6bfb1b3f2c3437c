/**
 * The replica's report of what runs, read over loopback HTTP with the clock its gauges use: vLLM's
 * `vllm:lora_requests_info` values are times on the replica's clock, and its `Date` header is that
 * clock too (uvicorn). A stand-in /metrics server plays what vLLM writes in each case.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { HttpReplicaApi } from '../../src/backends/http-replica-api';

const NOW_S = 1_750_000_000;
const info = (running: string, value: number) =>
  `vllm:lora_requests_info{max_lora="4",running_lora_adapters="${running}",waiting_lora_adapters=""} ${value}`;

let server: Server;
let url: string;
let body = '';
const api = new HttpReplicaApi();

beforeAll(async () => {
  server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain', date: new Date(NOW_S * 1000).toUTCString() });
    res.end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await api.close();
  await new Promise((r) => server.close(r));
});

describe("the replica's word, on the replica's clock", () => {
  it('after its clock stepped back, an older idle series does not hide the adapter running now', async () => {
    body = [info('', NOW_S + 60), info('b', NOW_S - 1)].join('\n');
    expect((await api.activity(url, 1000)).busy).toEqual(['b']);
  });

  it('in step, the latest series is the word', async () => {
    body = [info('b', NOW_S - 60), info('', NOW_S - 1)].join('\n');
    expect((await api.activity(url, 1000)).busy).toEqual([]);
  });

  it('several API server processes summing the gauge: it cannot say', async () => {
    body = [info('', 2 * NOW_S - 30), info('b', NOW_S - 1)].join('\n');
    expect((await api.activity(url, 1000)).busy).toBeUndefined();
  });
});
