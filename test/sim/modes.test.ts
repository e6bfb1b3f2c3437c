import { SimFleet, type ReplicaOptions } from '../../sim/fleet';
import { chat, get, post } from '../helpers/http';
import { waitFor } from '../../harness/wait';
import { oneLoraPerBatch } from '../helpers/replicas';
import { readVllmLoad, summedOverProcesses } from '../../src/metrics/replica-load';

/** The simulator's selectable upstream behaviours (docs/replica-apis.md, "Modes"), over HTTP. */
describe('simulator modes', () => {
  let fleet: SimFleet | undefined;
  afterEach(async () => {
    await fleet?.stop();
    fleet = undefined;
  });
  const start = async (...specs: ReplicaOptions[]) => {
    fleet = await SimFleet.start(specs);
    return fleet.urls;
  };

  it('stamps created with the current Unix time, not twice it', async () => {
    const [u] = await start({ staticAdapters: [{ name: 'a', path: '/adapters/a' }] });
    const now = Date.now() / 1000;
    const models = (await get(u!, '/v1/models')).json().data as { created: number }[];
    const done = (await post(u!, '/v1/chat/completions', chat('a', 1))).json();
    for (const t of [...models.map((m) => m.created), done.created]) {
      expect(Math.abs(t - now)).toBeLessThan(60);
    }
  });

  it('gives completion ids unique across replicas, as vLLM does (a random id per request)', async () => {
    const urls = await start({}, {});
    const ids = [];
    for (const u of urls)
      for (let i = 0; i < 3; i++)
        ids.push(
          (await post(u, '/v1/chat/completions', chat('meta-llama/Llama-3.1-8B-Instruct', 1))).json().id,
        );
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(id).toMatch(/^chatcmpl-/);
  });

  it("stamps an embedding's created with the time of the request, not the replica's start", async () => {
    const [u] = await start({});
    const first = (
      await post(u!, '/v1/embeddings', { model: 'meta-llama/Llama-3.1-8B-Instruct', input: 'hi' })
    ).json().created as number;
    await new Promise((r) => setTimeout(r, 2100));
    const later = (
      await post(u!, '/v1/embeddings', { model: 'meta-llama/Llama-3.1-8B-Instruct', input: 'hi' })
    ).json().created as number;
    expect(later - first).toBeGreaterThanOrEqual(2);
  });

  describe('vLLM unload', () => {
    const spec = (unload?: 'registry' | 'frees'): ReplicaOptions => ({
      adapterDirs: ['/adapters'],
      timeScale: 20,
      unload,
      vllmMetrics: 'residency',
      engine: { maxCpuLoras: 3, maxLoras: 2 },
    });
    const load = (u: string, n: string) =>
      post(u, '/v1/load_lora_adapter', { lora_name: n, lora_path: `/adapters/${n}` });
    const unload = (u: string, n: string) => post(u, '/v1/unload_lora_adapter', { lora_name: n });

    it('released: unload forgets the name only; loading it again caches a second copy', async () => {
      const [u] = await start(spec());
      expect((await load(u!, 'a')).status).toBe(200);
      expect((await unload(u!, 'a')).status).toBe(200);
      expect((await load(u!, 'a')).status).toBe(200);
      const engine = fleet!.replicas[0]!.engine;
      expect(engine.stats().cachedAdapters).toEqual(['a#1', 'a#2']);
      // The residency metrics report both copies under the name: one series per level.
      const text = (await get(u!, '/metrics')).text;
      expect(text).toMatch(/^vllm:num_cpu_loaded_lora_adapters\{.*\} 1\.0$/m);
      expect(
        text.match(/^vllm:lora_adapter_loaded\{adapter_name="a",.*level="cpu".*\} 1\.0$/gm),
      ).toHaveLength(2);
      // Two more loads: the deregistered copy is the oldest, and goes first.
      await load(u!, 'b');
      await load(u!, 'c');
      expect(engine.stats().cachedAdapters).toEqual(['a#2', 'b#3', 'c#4']);
    });

    it('fixed (the Rust frontend): unload frees the weights; a reload reads storage under a new id', async () => {
      const [u] = await start(spec('frees'));
      await load(u!, 'a');
      await unload(u!, 'a');
      expect(fleet!.replicas[0]!.engine.stats().cachedAdapters).toEqual([]);
      await load(u!, 'a');
      expect(fleet!.replicas[0]!.engine.stats().cachedAdapters).toEqual(['a#2']);
    });
  });

  it('vLLM GET /version: {"version": ...}, with or without runtime LoRA updating', async () => {
    const [a, b] = await start({ vllmVersion: '0.12.0' }, { runtimeLoading: false });
    expect((await get(a!, '/version')).json()).toEqual({ version: '0.12.0' });
    expect((await get(b!, '/version')).json()).toEqual({ version: '0.11.0' });
  });

  it("vLLM's Rust frontend: /version names it, unload frees the weights, its texts for already loaded and unknown", async () => {
    const [u] = await start({ vllmFrontend: 'rust', adapterDirs: ['/adapters'] });
    expect((await get(u!, '/version')).json()).toEqual({
      version: '0.11.0',
      rust_frontend_version: '0.11.0',
    });
    const load = () => post(u!, '/v1/load_lora_adapter', { lora_name: 'a', lora_path: '/adapters/a' });
    expect((await load()).status).toBe(200);
    const again = await load();
    expect(again.status).toBe(400);
    expect(again.json().error).toEqual({
      message:
        "LoRA adapter `a` is already loaded. If you want to load the adapter in place, set 'load_inplace' to true.",
      type: 'invalid_request_error',
      param: 'lora_name',
      code: 'invalid_request_error',
    });
    expect((await post(u!, '/v1/unload_lora_adapter', { lora_name: 'a' })).status).toBe(200);
    expect(fleet!.replicas[0]!.engine.stats().cachedAdapters).toEqual([]);
    const absent = await post(u!, '/v1/unload_lora_adapter', { lora_name: 'a' });
    expect(absent.status).toBe(404);
    expect(absent.json().error).toMatchObject({
      message: 'The model `a` does not exist.',
      code: 'model_not_found',
    });
  });

  it('vLLM --api-server-count 3: lora_requests_info values add up over the processes, so no series reads as a time', async () => {
    const [one, three] = await start({}, { apiServers: 3 });
    const latest = async (u: string) => {
      let text = '';
      for (let i = 0; i < 3; i++) text = (await get(u, '/metrics')).text;
      const values = [...text.matchAll(/^vllm:lora_requests_info\{.*\} (\S+)$/gm)].map((m) => Number(m[1]));
      return { text, at: Math.max(...values) };
    };
    const now = Date.now() / 1000;
    const single = await latest(one!);
    expect(Math.abs(single.at - now)).toBeLessThan(60);
    expect(readVllmLoad(single.text, [], now).reportsActivity).toBe(true);
    const summed = await latest(three!);
    // Every process has set the idle label set once: three times the time.
    expect(summed.at / now).toBeCloseTo(3, 3);
    expect(summedOverProcesses(summed.at, now)).toBe(true);
    expect(readVllmLoad(summed.text, [], now).reportsActivity).toBeFalsy();
  });

  it('vLLM metrics: waiting counts requests deferred for max_loras in every mode, split by reason in residency', async () => {
    const urls = await start(
      oneLoraPerBatch('released'),
      oneLoraPerBatch('residency'),
      oneLoraPerBatch('by-reason'),
    );
    const pending = urls.flatMap((u) => [
      post(u, '/v1/chat/completions', chat('a', 30)),
      post(u, '/v1/chat/completions', chat('b', 1)),
    ]);
    await waitFor(() => fleet!.replicas.every((r) => r.engine.stats().waitingForLora === 1));
    const [released, residency, byReason] = await Promise.all(
      urls.map(async (u) => (await get(u, '/metrics')).text),
    );
    // Releases since vLLM PR #38435: the split, without the residency families.
    expect(byReason).toMatch(/^vllm:num_requests_waiting\{.*\} 1\.0$/m);
    expect(byReason).toMatch(/^vllm:num_requests_waiting_by_reason\{.*reason="deferred"\} 1\.0$/m);
    expect(byReason).not.toMatch(/lora_adapter_loaded/);
    expect(released).toMatch(/^vllm:num_requests_waiting\{.*\} 1\.0$/m);
    expect(released).not.toMatch(/waiting_by_reason|lora_adapter_loaded/);
    expect(residency).toMatch(/^vllm:num_requests_waiting\{.*\} 1\.0$/m);
    expect(residency).toMatch(/^vllm:num_requests_waiting_by_reason\{.*reason="deferred"\} 1\.0$/m);
    expect(residency).toMatch(/^vllm:num_requests_waiting_by_reason\{.*reason="capacity"\} 0\.0$/m);
    await Promise.all(pending);
  });

  it('vLLM main: "already loaded" carries the load_inplace hint, engine failures are not wrapped and answer 500', async () => {
    const [u] = await start({
      loadErrors: 'main',
      adapterDirs: ['/adapters'],
      adapterPaths: { '/big': 128 },
      timeScale: 20,
    });
    await post(u!, '/v1/load_lora_adapter', { lora_name: 'a', lora_path: '/adapters/a' });
    const again = await post(u!, '/v1/load_lora_adapter', { lora_name: 'a', lora_path: '/adapters/a' });
    expect([again.status, again.json().error.message]).toEqual([
      400,
      "The lora adapter 'a' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True.",
    ]);
    const inplace = await post(u!, '/v1/load_lora_adapter', {
      lora_name: 'a',
      lora_path: '/adapters/a',
      load_inplace: true,
    });
    expect(inplace.status).toBe(200);
    const big = await post(u!, '/v1/load_lora_adapter', { lora_name: 'big', lora_path: '/big' });
    // Since vLLM #36201: any engine failure of a load but "not found" is a 500.
    expect([big.status, big.json().error.type, big.json().error.message]).toEqual([
      500,
      'InternalServerError',
      'LoRA rank 128 is greater than max_lora_rank 64.',
    ]);
  });

  it('vLLM filesystem resolver: needs runtime updating, a matching base model, and answers 400 when found but unloadable', async () => {
    const [on, off] = await start(
      {
        resolverDir: '/cache',
        adapterPaths: { '/cache/good': 16, '/cache/other-base': 16, '/cache/huge': 128 },
        adapterBaseModels: { '/cache/other-base': 'Qwen/Qwen2.5-7B' },
        timeScale: 20,
      },
      { resolverDir: '/cache', adapterPaths: { '/cache/good': 16 }, runtimeLoading: false, timeScale: 20 },
    );
    expect((await post(on!, '/v1/chat/completions', chat('good', 1))).status).toBe(200);
    // Loaded eagerly, through the engine: the load is in the host cache before the request ran.
    expect(fleet!.replicas[0]!.engine.stats().cacheMissLoads).toBe(0);
    expect((await post(on!, '/v1/chat/completions', chat('other-base', 1))).status).toBe(404);
    const huge = await post(on!, '/v1/chat/completions', chat('huge', 1));
    expect([huge.status, huge.json().error.message]).toEqual([
      400,
      "LoRA adapter 'huge' was found but could not be loaded.",
    ]);
    expect((await post(off!, '/v1/chat/completions', chat('good', 1))).status).toBe(404);
  });

  describe('llama.cpp', () => {
    const llama = (over: ReplicaOptions = {}): ReplicaOptions => ({
      backend: 'llamacpp',
      // Both loaded with --lora: global scale 1.
      staticAdapters: [{ path: 'a.gguf' }, { path: 'b.gguf' }],
      timeScale: 20,
      ...over,
    });
    const ran = async (u: string, lora: unknown) => {
      expect(
        (await post(u, '/v1/chat/completions', chat('m', 1, lora === undefined ? {} : { lora }))).status,
      ).toBe(200);
      return fleet!.byUrl(u)!.requestRecords().at(-1)!.adapter;
    };

    it('per-request lora, by build: an empty list, a partial list, every adapter listed', async () => {
      const [clear, current, newest] = await start(
        llama({ llamaLora: 'clear' }),
        llama(),
        llama({ llamaLora: 'listed-only' }),
      );
      // Older builds: an empty list clears every scale; current and newest: the global scales.
      expect(await ran(clear!, [])).toBeNull();
      expect(await ran(current!, [])).toBe('a.gguf+b.gguf');
      expect(await ran(newest!, [])).toBe('a.gguf+b.gguf');
      // One listed: others at 0 (older, current), or left at their global scale (newest).
      expect(await ran(clear!, [{ id: 1, scale: 1 }])).toBe('b.gguf');
      expect(await ran(current!, [{ id: 1, scale: 1 }])).toBe('b.gguf');
      expect(await ran(newest!, [{ id: 1, scale: 1 }])).toBe('a.gguf+b.gguf');
      // Every adapter listed with an explicit scale means the same on all three.
      for (const u of [clear!, current!, newest!]) {
        expect(
          await ran(u, [
            { id: 0, scale: 0 },
            { id: 1, scale: 1 },
          ]),
        ).toBe('b.gguf');
        expect(
          await ran(u, [
            { id: 0, scale: 0 },
            { id: 1, scale: 0 },
          ]),
        ).toBeNull();
      }
    });

    it('an adapter id the replica does not have: refused by older builds, skipped since PR #18263 (b7516)', async () => {
      const [clear, current] = await start(llama({ llamaLora: 'clear' }), llama());
      // b7193 and b7502: parse_lora_request throws "invalid adapter id" (server-common.cpp); a request
      // answers it 400 (handle_completions_impl), POST /lora-adapters 500 server_error (ex_wrapper).
      const req = await post(clear!, '/v1/chat/completions', chat('m', 1, { lora: [{ id: 5, scale: 1 }] }));
      expect([req.status, req.json().error]).toEqual([
        400,
        { code: 400, message: 'invalid adapter id', type: 'invalid_request_error' },
      ]);
      const set = await post(clear!, '/lora-adapters', [{ id: 5, scale: 1 }]);
      expect([set.status, set.json().error]).toEqual([
        500,
        { code: 500, message: 'invalid adapter id', type: 'server_error' },
      ]);
      const notList = await post(clear!, '/v1/chat/completions', chat('m', 1, { lora: 'a' }));
      expect(notList.json().error.message).toBe(
        "Error: 'lora' must be an array of objects with 'id' and 'scale' fields",
      );
      // b7516 to b10573: the id is skipped.
      expect(await ran(current!, [{ id: 5, scale: 1 }])).toBeNull();
      expect((await post(current!, '/lora-adapters', [{ id: 5, scale: 1 }])).status).toBe(200);
    });

    it('without --metrics /metrics is 501, without --slots /slots is 501; n_busy_slots_per_decode is a gauge', async () => {
      const [bare, full] = await start(
        llama({ llamaMetrics: false, llamaSlots: false, llamaAdapterInfo: false }),
        llama(),
      );
      const m = await get(bare!, '/metrics');
      expect([m.status, m.json()]).toEqual([
        501,
        {
          error: {
            code: 501,
            message: 'This server does not support metrics endpoint. Start it with `--metrics`',
            type: 'not_supported_error',
          },
        },
      ]);
      expect((await get(bare!, '/slots')).status).toBe(501);
      expect((await get(bare!, '/lora-adapters')).json()).toEqual([
        { id: 0, path: 'a.gguf', scale: 1 },
        { id: 1, path: 'b.gguf', scale: 1 },
      ]);
      expect((await get(full!, '/metrics')).text).toMatch(/^# TYPE llamacpp:n_busy_slots_per_decode gauge$/m);
    });
  });
});
