import { fleetStatus } from '../../src/status/status';
import type { ReplicaOptions } from '../../sim/fleet';
import { CoreHarness } from '../helpers/core-harness';
import { waitFor } from '../../harness/wait';
import { oneLoraPerBatch } from '../helpers/replicas';

/**
 * The router against the simulator in each upstream mode it must handle (docs/replica-apis.md):
 * llama.cpp builds that read the `lora` field differently or run without `--metrics`, vLLM's
 * error texts across releases, and newer vLLM metrics.
 */
const BASE = 'meta-llama/Llama-3.1-8B-Instruct';

describe('the router against replicas as they really are', () => {
  let h: CoreHarness | undefined;
  afterEach(async () => {
    await h?.stop();
    h = undefined;
  });

  const llama = (over: ReplicaOptions = {}): ReplicaOptions => ({
    backend: 'llamacpp',
    // Started with `--lora a.gguf --lora b.gguf`: both at global scale 1.
    staticAdapters: [{ path: '/models/a.gguf' }, { path: '/models/b.gguf' }],
    timeScale: 10,
    ...over,
  });
  const llamaConfig = (urls: string[]) => ({
    replicas: urls.map((url) => ({ url, backend: 'llamacpp' })),
    base_model: BASE,
    adapters: [
      { name: 'a', path: 'a.gguf', static: true },
      { name: 'b', path: 'b.gguf', static: true },
    ],
  });

  it.each(['clear', 'empty-is-absent', 'listed-only'] as const)(
    'llama.cpp (%s): every listed adapter gets an explicit scale, on base requests too',
    async (llamaLora) => {
      h = await CoreHarness.start([llama({ llamaLora })], llamaConfig);
      const replica = h.fleet.replicas[0]!;
      await h.nextPoll(); // the list read (before it: the test below)
      for (const [model, expected] of [
        [BASE, null],
        ['b', '/models/b.gguf'],
        ['a', '/models/a.gguf'],
      ] as const) {
        const res = await h.chat(model, 1);
        expect(res.status).toBe(200);
        expect([model, replica.requestRecords().at(-1)!.adapter]).toEqual([model, expected]);
      }
      const body = JSON.parse(((await h.chat(BASE, 1)).outcome as { body: string }).body);
      expect(body.lora).toEqual([
        { id: 0, scale: 0 },
        { id: 1, scale: 0 },
      ]);
    },
  );

  it('llama.cpp whose adapter list is not read yet gets no request: its global scales would apply', async () => {
    // The first poll outlasts the router's own refresh: without the list, a body cannot name
    // every adapter at scale 0, and this build applies its global scales to an empty list.
    h = await CoreHarness.start([llama({ llamaLora: 'empty-is-absent' })], (urls) => ({
      ...llamaConfig(urls),
      refresh_timeout_ms: 50,
    }));
    const replica = h.fleet.replicas[0]!;
    replica.fault({ kind: 'slowMetrics', ms: 1000 });
    const first = await h.chat(BASE, 1);
    expect(replica.requestRecords().map((r) => r.adapter)).toEqual([]);
    expect(first.status).toBe(503);
    replica.fault({ kind: 'slowMetrics', ms: 0 });
    await h.nextPoll();
    expect((await h.chat(BASE, 1)).status).toBe(200);
    expect(replica.requestRecords().map((r) => r.adapter)).toEqual([null]);
  });

  it('llama.cpp without --metrics: routes on /slots and in-flight counts, and says so on the status page', async () => {
    h = await CoreHarness.start(
      [llama({ llamaMetrics: false }), llama({ llamaMetrics: false, llamaSlots: false })],
      llamaConfig,
    );
    for (let i = 0; i < 10; i++) {
      const r = await h.chat('b', 1);
      expect(r.status).toBe(200);
    }
    await h.nextPoll();
    const s = await fleetStatus(h.rt);
    expect(s.replicas.map((r) => [r.health, r.loadFrom])).toEqual([
      ['up', 'slots'],
      ['up', 'health'],
    ]);
    expect(h.fleet.replicas.reduce((n, r) => n + r.requestRecords().length, 0)).toBe(10);
  });

  describe('vLLM load errors', () => {
    const vllm = (over: ReplicaOptions = {}): ReplicaOptions => ({
      adapterDirs: ['/adapters'],
      adapterPaths: { '/adapters/huge': 128 },
      timeScale: 10,
      ...over,
    });
    const onDemand = (urls: string[]) => ({
      replicas: urls.map((url) => ({ url })),
      base_model: BASE,
      adapter_path_template: '/adapters/{name}',
      max_loaded_adapters: 4,
    });

    it.each(['released', 'main'] as const)(
      "%s: a rank above max_lora_rank is the client's 400, not a replica failure",
      async (loadErrors) => {
        h = await CoreHarness.start([vllm({ loadErrors })], onDemand);
        const r = await h.chat('huge', 1);
        expect([r.status, r.json.error.type, r.json.error.code]).toEqual([
          400,
          'invalid_request_error',
          'adapter_rejected',
        ]);
        expect(r.json.error.message).toMatch(/LoRA rank 128 is greater than max_lora_rank 64/);
        // The replica still serves everything else.
        expect((await h.chat('fine', 1)).status).toBe(200);
      },
    );

    it('"already loaded" with the load_inplace hint counts as loaded', async () => {
      h = await CoreHarness.start([vllm({ loadErrors: 'main' })], onDemand);
      // Another router loaded it behind this one's back, after this one's last poll.
      await fetch(`${h.fleet.urls[0]}/v1/load_lora_adapter`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ lora_name: 'shared', lora_path: '/adapters/shared' }),
      });
      expect((await h.chat('shared', 1)).status).toBe(200);
    });
  });

  it('vLLM: waiting holds a request deferred for max_loras, taken out where _by_reason splits it', async () => {
    h = await CoreHarness.start([oneLoraPerBatch('released'), oneLoraPerBatch('residency')], (urls) => ({
      replicas: urls.map((url) => ({ url })),
      base_model: BASE,
      adapters: [
        { name: 'a', path: '/adapters/a', static: true },
        { name: 'b', path: '/adapters/b', static: true },
      ],
    }));
    // On each replica: a long request of a runs, one of b waits for the LoRA budget.
    const direct = (url: string, model: string, n: number) =>
      fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: n }),
      });
    const pending = h.fleet.urls.flatMap((u) => [direct(u, 'a', 60), direct(u, 'b', 1)]);
    const harness = h;
    await waitFor(() => harness.fleet.replicas.every((r) => r.engine.stats().waitingForLora === 1));
    await h.nextPoll();
    const s = await fleetStatus(h.rt);
    // Every release counts b in num_requests_waiting; only the split lets the router take it out.
    expect(s.replicas.map((r) => [r.running, r.waiting])).toEqual([
      [1, 1],
      [1, 0],
    ]);
    await Promise.all(pending);
  });

  it('newer vLLM: residency metrics are read; the status page shows registry and residency where they disagree', async () => {
    h = await CoreHarness.start(
      [
        {
          adapterDirs: ['/adapters'],
          timeScale: 10,
          vllmMetrics: 'residency',
          engine: { maxCpuLoras: 3, maxLoras: 2 },
        },
      ],
      (urls) => ({
        replicas: urls.map((url) => ({ url })),
        base_model: BASE,
        adapter_path_template: '/adapters/{name}',
        max_loaded_adapters: 2,
      }),
    );
    // Three adapters through two router slots: the router unloads x to load z, and released
    // vLLM keeps x's weights in its CPU cache (room for three).
    for (const name of ['x', 'y', 'z']) expect((await h.chat(name, 1)).status).toBe(200);
    expect(h.unloads(0).map((u) => u.name)).toEqual(['x']);
    await h.nextPoll();
    const r = (await fleetStatus(h.rt)).replicas[0]!;
    expect(r.adapters.map((a) => a.name)).toEqual(['y', 'z']);
    expect(r.residency).toEqual({ gpu: ['y', 'z'], cpu: ['x', 'y', 'z'], disagree: ['x'] });
  });
});

describe('residency preferred to the registry', () => {
  let h: CoreHarness | undefined;
  afterEach(() => h?.stop());

  it('among replicas that registered an adapter, sends it to those that really hold it', async () => {
    const spec: ReplicaOptions = {
      adapterDirs: ['/adapters'],
      timeScale: 10,
      vllmMetrics: 'residency',
      engine: { maxCpuLoras: 1, maxLoras: 1 },
    };
    h = await CoreHarness.start([spec, spec], (urls) => ({
      replicas: urls.map((url) => ({ url })),
      base_model: 'meta-llama/Llama-3.1-8B-Instruct',
      adapter_path_template: '/adapters/{name}',
      max_loaded_adapters: 4,
    }));
    const load = (url: string, name: string) =>
      fetch(`${url}/v1/load_lora_adapter`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ lora_name: name, lora_path: `/adapters/${name}` }),
      });
    const [a, b] = h.fleet.urls as [string, string];
    // Both register x (another router loaded them); on a, y then pushes x's weights out.
    await load(a, 'x');
    await load(b, 'x');
    await load(a, 'y');
    await h.nextPoll();
    for (let i = 0; i < 12; i++) {
      const r = await h.chat('x', 1);
      expect([r.status, r.outcome.kind === 'proxy' && r.outcome.url]).toEqual([200, b]);
    }
    expect(h.fleet.replicas[0]!.engine.stats().cacheMissLoads).toBe(0);
  });
});
