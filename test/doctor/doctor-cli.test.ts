import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { useSimFleet } from '../helpers/sim-fleet';

/**
 * `kong-lora-router doctor` as an operator runs it (the built bin), over real HTTP to simulated
 * replicas on loopback, in each of the simulator's upstream modes.
 */
const BIN = join(__dirname, '..', '..', 'dist', 'pluginserver', 'doctor.js');

function doctor(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, 'doctor', ...args], { timeout: 30_000 }, (error, stdout, stderr) => {
      const code = error ? ((error as { code?: unknown }).code as number) : 0;
      resolve({ code: typeof code === 'number' ? code : -1, out: stdout, err: stderr });
    });
  });
}

describe('kong-lora-router doctor', () => {
  const { start, fleet, stop } = useSimFleet();

  it('finds a released vLLM and a llama.cpp with --metrics fit, and changes nothing on them', async () => {
    const [v, l] = await start({ engine: { maxLoras: 4 } }, { backend: 'llamacpp' });
    const r = await doctor('--replicas', `${v},${l}`, '--max-loaded-adapters', '4');
    expect(r.code).toBe(0);
    expect(r.out).toContain(`${v}: fit (vllm`);
    expect(r.out).toContain('runtime LoRA API: on');
    expect(r.out).toContain('--max-loras: 4; max_loaded_adapters: 4; prefix caching: on; API servers: 1');
    for (const s of ['queue', 'kv_usage', 'lora_requests_info', 'cache_config_info', 'prefill_histograms'])
      expect(r.out).toContain(`signal ${s}: exported`);
    expect(r.out).toContain(`${l}: fit (llamacpp`);
    expect(r.out).toMatch(/signal max_model_len: MISSING .*the replica answers for itself/);
    expect(r.out).toContain('fleet: fit (2 replicas)');
    // No load or unload call at all.
    expect(fleet().replicas[0]!.adapterLog()).toEqual([]);
    expect(fleet().replicas[0]!.state().registry).toEqual([]);
  });

  it("reports the version vLLM's /version answers", async () => {
    const [v] = await start({ vllmVersion: '0.12.0' });
    const r = await doctor('--replicas', v!);
    expect(r.out).toContain(`${v}: fit (vllm 0.12.0)`);
  });

  it("tells vLLM's Rust frontend from its /version, and what differs there", async () => {
    const [v] = await start({ vllmFrontend: 'rust', vllmVersion: '0.30.0' });
    const r = await doctor('--replicas', v!);
    expect(r.code).toBe(0);
    expect(r.out).toContain(`${v}: fit (vllm 0.30.0, Rust frontend)`);
    expect(r.out).toMatch(/info: Rust frontend: an unload frees .*VLLM_RUNTIME_LORA_ALLOWED_PATH_PREFIXES/);
  });

  it('tells several API server processes (summed lora_requests_info) and says what the router does instead', async () => {
    const [v] = await start({ apiServers: 3 });
    // Each process has set the idle label set once the doctor reads: one scrape each.
    for (let i = 0; i < 3; i++) await fetch(`${v}/metrics`);
    const r = await doctor('--replicas', v!);
    expect(r.code).toBe(0);
    expect(r.out).toContain('API servers: 3');
    expect(r.out).toMatch(/warn: 3 API server processes .*unloads rest on the router's leases/);
  });

  it('reads the by-reason metrics mode (num_requests_waiting_by_reason) like the released one', async () => {
    const [v] = await start({ vllmMetrics: 'by-reason' });
    const r = await doctor('--replicas', v!, '--max-loaded-adapters', '4');
    expect(r.code).toBe(0);
    for (const s of ['queue', 'lora_requests_info', 'cache_config_info', 'prefill_histograms'])
      expect(r.out).toContain(`signal ${s}: exported`);
  });

  it('says what the router falls back to where vLLM runs with --disable-log-stats', async () => {
    const [v] = await start({ vllmMetrics: 'no-stats' });
    const r = await doctor('--replicas', v!);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/signal lora_requests_info: MISSING .*guarded by the router's leases alone/);
    expect(r.out).toMatch(/signal prefill_histograms: MISSING .*stays at prefill_tokens_per_second/);
    expect(r.out).toMatch(/signal decode_histograms: MISSING .*stays at its default/);
    expect(r.out).toContain('prefix caching: not reported');
    expect(r.out).toContain('warn: no vllm: metric at all');
  });

  it('reads the newer metrics mode (residency) like the released one', async () => {
    const [v] = await start({ vllmMetrics: 'residency', loadErrors: 'main', engine: { maxLoras: 2 } });
    const r = await doctor('--replicas', v!, '--max-loaded-adapters', '4');
    expect(r.code).toBe(0);
    expect(r.out).toContain('signal lora_requests_info: exported');
    expect(r.out).toMatch(/warn: max_loaded_adapters 4 > --max-loras 2: .*--max-cpu-loras/);
  });

  it('finds the other simulator modes fit, a load tried on each vLLM', async () => {
    const dirs = { adapterDirs: ['/adapters'] };
    const urls = await start(
      { ...dirs, unload: 'frees' },
      { ...dirs, contextErrors: 'renderer' },
      { ...dirs, errorStyle: 'flat' },
      { ...dirs, resolverDir: '/adapters' },
      { backend: 'llamacpp', llamaLora: 'clear' },
      { backend: 'llamacpp', llamaLora: 'listed-only', llamaAdapterInfo: false },
    );
    const r = await doctor(
      '--replicas',
      urls.map((u, i) => (i >= 4 ? `llamacpp=${u}` : u)).join(','),
      '--try-load',
      'sql=/adapters/sql',
    );
    expect(r.code).toBe(0);
    expect(r.out.match(/try-load sql: loaded in \d+ ms, unloaded in \d+ ms/g)).toHaveLength(4);
    expect(r.out).toContain('fleet: fit (6 replicas)');
  });

  it('finds a vLLM without runtime loading unfit, with exit status 1', async () => {
    const [v, ok] = await start({ runtimeLoading: false }, {});
    const r = await doctor('--replicas', `${v},${ok}`);
    expect(r.code).toBe(1);
    expect(r.out).toContain(`${v}: UNFIT`);
    expect(r.out).toContain('runtime LoRA API: off');
    expect(r.out).toContain(`${ok}: fit`);
    expect(r.out).toContain('fleet: UNFIT (1 of 2 replicas)');
  });

  it('tells llama.cpp without --metrics, with and without /slots', async () => {
    const [slots, bare] = await start(
      { backend: 'llamacpp', llamaMetrics: false },
      { backend: 'llamacpp', llamaMetrics: false, llamaSlots: false },
    );
    const r = await doctor('--replicas', `${slots},${bare}`);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/signal queue: MISSING .*busy slots from \/slots, or none/);
    expect(r.out).toContain('/metrics answered 501 (llama-server without --metrics): load from /slots');
    expect(r.out).toContain('load from /health alone (no figures)');
  });

  it('finds an unreachable replica unfit', async () => {
    const [v] = await start({});
    await stop();
    const r = await doctor('--replicas', v!, '--timeout-ms', '2000');
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/UNFIT[\s\S]*error: unreachable/);
  });

  it('--try-load loads one adapter, times it and unloads it', async () => {
    const [v] = await start({ adapterDirs: ['/adapters'] });
    const r = await doctor('--replicas', v!, '--try-load', 'sql=/adapters/sql');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/try-load sql: loaded in \d+ ms, unloaded in \d+ ms/);
    const log = fleet()
      .replicas[0]!.adapterLog()
      .filter((e) => e.status === 200);
    expect(log.map((e) => [e.op, e.name])).toEqual([
      ['load', 'sql'],
      ['unload', 'sql'],
    ]);
    expect(fleet().replicas[0]!.state().registry).toEqual([]);
  });

  it('--try-load of an adapter the replica rejects makes the fleet unfit', async () => {
    const [v] = await start({ adapterDirs: ['/adapters'], adapterDirHolds: /^\/adapters\/sql$/ });
    const r = await doctor('--replicas', v!, '--try-load', 'nope=/adapters/nope');
    expect(r.code).toBe(1);
    expect(r.out).toMatch(/try-load nope: failed: the adapter: .*No adapter found/);
  });

  it("answers --version with the package's version", async () => {
    const r = await doctor('--version');
    expect(r.code).toBe(0);
    expect(r.out.trim()).toBe((require('../../package.json') as { version: string }).version);
  });

  it('answers a usage error with exit status 2', async () => {
    const r = await doctor('--max-loaded-adapters', '4');
    expect(r.code).toBe(2);
    expect(r.err).toContain('give either --replicas or --config');
  });
});
