import { createHook } from 'node:async_hooks';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { HttpReplicaApi } from '../../src/backends/http-replica-api';
import type { ReplicaSpec } from '../../src/fleet/types';

/**
 * A poll of a replica runs every 500 ms in the plugin server, paid by the requests meanwhile
 * (docs/benchmarks.md, "The request path inside the plugin server"). An answer the replica gave
 * last time is not read again (the registry of an unchanged `/v1/models`, the samples of an
 * unchanged `/metrics`), and what depends on the answer's time (its `Date` against the
 * `lora_requests_info` times) is still worked out afresh.
 */

const MODELS = (adapters: string[]) =>
  JSON.stringify({
    object: 'list',
    data: [
      { id: 'base', object: 'model', root: 'base', parent: null, max_model_len: 8192 },
      ...adapters.map((a) => ({ id: a, object: 'model', root: `/adapters/${a}`, parent: 'base' })),
    ],
  });

/** `lora_requests_info` set at `at` (Unix seconds), naming `code` as running. */
const METRICS = (at: number) =>
  [
    '# TYPE vllm:num_requests_running gauge',
    'vllm:num_requests_running{engine="0",model_name="base"} 1.0',
    'vllm:num_requests_waiting{engine="0",model_name="base"} 2.0',
    'vllm:kv_cache_usage_perc{engine="0",model_name="base"} 0.25',
    `vllm:lora_requests_info{max_lora="4",running_lora_adapters="code",waiting_lora_adapters=""} ${at}`,
    'vllm:prompt_tokens_total{engine="0",model_name="base"} 100.0',
    '',
  ].join('\n');

interface Answers {
  metrics: string;
  models: string;
  /** The `Date` header, Unix seconds. */
  dateS: number;
}

function replica(answers: Answers): Promise<{ spec: ReplicaSpec; server: Server }> {
  const server = createServer((req, res) => {
    const text = req.url === '/metrics' ? answers.metrics : answers.models;
    res.writeHead(200, { date: new Date(answers.dateS * 1000).toUTCString(), 'content-length': text.length });
    res.end(text);
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        spec: {
          url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
          backend: 'vllm',
          priority: 0,
        },
        server,
      }),
    ),
  );
}

describe('a poll of a replica whose answer did not change', () => {
  const api = new HttpReplicaApi();
  afterAll(() => api.close());

  it('reads its registry once, and again when it changes', async () => {
    const answers: Answers = { metrics: METRICS(1.7e9), models: MODELS(['code', 'chat']), dateS: 1.7e9 };
    const { spec, server } = await replica(answers);
    try {
      const first = await api.scrape(spec, 2000);
      const again = await api.scrape(spec, 2000);
      expect(again.registry).toBe(first.registry);
      expect(again.registry).toEqual([
        { name: 'code', path: '/adapters/code' },
        { name: 'chat', path: '/adapters/chat' },
      ]);
      expect(again.maxModelLen).toBe(8192);
      expect(again.load).toEqual(first.load);
      // What a poll hands on cannot be changed under the next one.
      expect(Object.isFrozen(again.registry)).toBe(true);
      expect(Object.isFrozen(again.registry![0])).toBe(true);
      answers.models = MODELS(['code']);
      const changed = await api.scrape(spec, 2000);
      expect(changed.registry).toEqual([{ name: 'code', path: '/adapters/code' }]);
    } finally {
      server.close();
    }
  });

  it('reads the same samples against each answer’s own time', async () => {
    const answers: Answers = { metrics: METRICS(1.7e9), models: MODELS(['code']), dateS: 1.7e9 };
    const { spec, server } = await replica(answers);
    try {
      const current = await api.scrape(spec, 2000);
      expect(current.load).toMatchObject({ running: 1, waiting: 2, kvUsage: 0.25, reportsActivity: true });
      expect(current.load.activeAdapters).toEqual(['code']);
      expect(current.load.promptTokensTotal).toBe(100);
      // The same text, while the replica's clock says the series' time is no time at all (summed
      // over API server processes, past 1.5 x now): the replica cannot say what runs.
      answers.dateS = 1e9;
      const summed = await api.scrape(spec, 2000);
      expect(summed.load.reportsActivity).toBeUndefined();
      expect(summed.load.activeAdapters).toEqual([]);
      expect(summed.load.running).toBe(1);
    } finally {
      server.close();
    }
  });

  it('counts a malformed line on every poll that brings it', async () => {
    const answers: Answers = {
      metrics: `${METRICS(1.7e9)}vllm:num_requests_waiting{engine="0} 3\n`,
      models: MODELS([]),
      dateS: 1.7e9,
    };
    const { spec, server } = await replica(answers);
    try {
      for (let i = 0; i < 3; i++) expect((await api.scrape(spec, 2000)).load.malformedLines).toBe(1);
    } finally {
      server.close();
    }
  });
});

/**
 * The promises one poll of a vLLM replica makes (its `/metrics` and `/v1/models`, both unchanged):
 * 22 when each call read its answer through undici's `request` (a body stream read with
 * `text()`); the server is node:http's, which makes none of its own.
 */
const MOST_PROMISES = 14;

describe('a poll of a vLLM replica over HTTP', () => {
  const api = new HttpReplicaApi();
  afterAll(() => api.close());

  it(`makes at most ${MOST_PROMISES} promises`, async () => {
    const { spec, server } = await replica({
      metrics: METRICS(1.7e9),
      models: MODELS(['code']),
      dateS: 1.7e9,
    });
    try {
      for (let i = 0; i < 20; i++) await api.scrape(spec, 2000);
      const counts: number[] = [];
      for (let i = 0; i < 10; i++) {
        let promises = 0;
        const hook = createHook({ init: (_id, type) => void (type === 'PROMISE' && promises++) }).enable();
        try {
          await api.scrape(spec, 2000);
        } finally {
          hook.disable();
        }
        counts.push(promises);
      }
      expect(Math.min(...counts)).toBeLessThanOrEqual(MOST_PROMISES);
    } finally {
      server.close();
    }
  });
});
