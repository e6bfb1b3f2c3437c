/**
 * The replica's report of what runs, read over loopback HTTP with the clock its gauges use: vLLM's
 * `vllm:lora_requests_info` values are times on the replica's clock, and its `Date` header is that
 * clock too (uvicorn). A stand-in /metrics server plays what vLLM writes in each case, and texts
 * that are not written whole.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { HttpReplicaApi } from '../../src/backends/http-replica-api';
import { ReplicaWord, type Withheld } from '../../src/adapters/replica-word';
import { systemClock } from '../../src/clock';
import { silentLogger } from '../../src/log';

const NOW_S = 1_750_000_000;
const info = (running: string, value: number) =>
  `vllm:lora_requests_info{max_lora="4",running_lora_adapters="${running}",waiting_lora_adapters=""} ${value}`;

/** What vLLM writes: `med` running now (its series set last), idle a second before. */
const WHOLE = [
  '# HELP vllm:lora_requests_info Running stats on lora requests.',
  '# TYPE vllm:lora_requests_info gauge',
  'vllm:num_requests_running{engine="0",model_name="base"} 1.0',
  `vllm:lora_requests_info{max_lora="6",running_lora_adapters="",waiting_lora_adapters=""} ${NOW_S - 1}`,
  `vllm:lora_requests_info{max_lora="6",running_lora_adapters="med",waiting_lora_adapters=""} ${NOW_S - 2}`,
  `vllm:lora_requests_info{max_lora="6",running_lora_adapters="med",waiting_lora_adapters=""} ${NOW_S}`,
].join('\n');

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

// A text answered 200 but not written whole: a proxy's error page, label quotes gone, a line cut
// short (the simulation's `garbled` scrape fault, seed 102764). It may have lost the series naming
// a running adapter, so it is no word to unload on; not "cannot say" (a replica without the
// gauge), on which the lease rules alone decide.
describe("the replica's word from a /metrics text not written whole", () => {
  it('a whole text is read as before', async () => {
    body = WHOLE;
    expect((await api.activity(url, 1000)).busy).toEqual(['med']);
  });

  it.each([
    // The simulation's garbled fault, mode 0: every labelled line unreadable, so no series at all.
    ['label quotes gone', WHOLE.replace(/="/g, '=').replace(/",/g, ',')],
    // The series naming `med` cut short: the idle one, set earlier, would read as the latest.
    [
      'the running series cut short',
      WHOLE.split('\n').slice(0, 5).join('\n') + '\nvllm:lora_requests_info{max_lo',
    ],
    ['a page of something else', '<html><body><h1>502 Bad Gateway</h1></body></html>'],
  ])('%s: no word on what runs (an error, not "cannot say")', async (_why, text) => {
    body = text;
    await expect(api.activity(url, 1000)).rejects.toThrow(/cannot be read/);
  });

  it('so the unload is withheld as unreachable, not sent on the lease rules alone', async () => {
    body = WHOLE.replace(/="/g, '=').replace(/",/g, ',');
    const word = new ReplicaWord(api, systemClock, silentLogger);
    const withheld: Withheld[] = [];
    word.addWithheldListener((w) => withheld.push(w));
    expect(await word.idleNow(url, 'med', new Set(), 1000)).toBe('unreachable');
    expect(withheld).toEqual([{ url, adapter: 'med', reason: 'unreachable' }]);
  });
});
