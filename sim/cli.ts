import { parseArgs } from 'node:util';
import { defaultLoadCost } from './engine/load-cost';
import { SimFleet } from './fleet';
import type { ReplicaOptions, StaticAdapter } from './http/replica';

const HELP = `Usage: npm run sim -- [options]

Starts simulated vLLM and llama.cpp replicas on loopback (see DEVELOPERS.md, "Replica simulator").

  --vllm N               vLLM replicas (default 2)
  --llamacpp N           llama.cpp replicas (default 0)
  --port P               first port; replicas take P, P+1, ... (default 0: ephemeral)
  --host H               address to listen on (default 127.0.0.1; 0.0.0.0 in a container)
  --base-model NAME      base model id (default meta-llama/Llama-3.1-8B-Instruct)
  --lora-modules LIST    vLLM adapters registered at start: name=path,name=path
  --adapter-dir DIR      any DIR/<name> is a loadable adapter (default /adapters)
  --no-runtime-loading   vLLM without VLLM_ALLOW_RUNTIME_LORA_UPDATING (load routes 404)
  --max-loras N          distinct adapters per batch (default 4)
  --max-cpu-loras N      adapters cached in host memory (default 8)
  --max-num-seqs N       running slots (default 16)
  --time-scale X         divide every modelled duration by X (default 1)

Adapter load cost (modelled: adapter bytes / read bandwidth + fixed overhead; the bytes come
from the rank, Llama-3.1-8B's linear layers and bf16; rank 16 = 84 MB, ~100 ms by default):
  --load-ms MS           fixed overhead of one load, modelled ms (default 60)
  --load-read-mbps N     read bandwidth of the adapters' storage, MB/s (default 2000, local
                         NVMe; ~100 for network storage)

Upstream behaviour (docs/replica-apis.md names the source and release of each):
  --error-style STYLE    vLLM error body: nested (>= 0.10.1, default) or flat
  --load-errors MODE     vLLM load errors: released (<= v0.17: engine failures prefixed "Call
                         to add_lora method failed: ", default) or main (>= v0.18.0 with main's
                         texts: a rejected adapter is a 500, "already loaded" adds the
                         load_inplace hint)
  --context-errors MODE  vLLM over-long prompt texts: released (v0.11: "your request has P
                         input tokens", or "'max_tokens' or 'max_completion_tokens' is too
                         large: M", default) or renderer (v0.19.0: "you requested M output
                         tokens and your prompt contains at least P ...")
  --unload MODE          vLLM unload: registry (Python frontend, every release: only the name
                         goes, the weights stay cached; default) or frees (Rust frontend
                         >= v0.23.0, and the open Python fix)
  --vllm-metrics MODE    released (v0.11.0 to v0.19.x, default), by-reason (>= v0.20.0:
                         num_requests_waiting_by_reason, computed tokens), residency (by-reason
                         plus lora_adapter_loaded, num_{gpu,cpu}_loaded_lora_adapters: an open
                         PR) or no-stats (--disable-log-stats: no vllm: family at all)
  --vllm-version V       what vLLM's GET /version answers (default 0.11.0)
  --vllm-frontend F      python (default) or rust (VLLM_USE_RUST_FRONTEND=1, >= v0.23.0: unload
                         frees the weights, its own texts for "already loaded" and an unknown name)
  --api-servers N        vLLM --api-server-count: above 1, /metrics sums each gauge over the
                         processes (Prometheus multiprocess mode; lora_requests_info's times add up)
  --resolver-dir DIR     vLLM filesystem resolver (VLLM_LORA_RESOLVER_CACHE_DIR=DIR, VLLM_PLUGINS
                         unset or listing it): unknown models load from DIR/<name>
  --llama-lora-mode M    llama.cpp per-request lora: clear (b7502 and older), empty-is-absent
                         (b7516 and later, default) or listed-only (not found upstream)
  --llama-no-metrics     llama.cpp without --metrics (/metrics answers 501)
  --llama-no-slots       llama.cpp with --no-slots (/slots answers 501)
  --llama-lora LIST      llama.cpp adapter files loaded at start (--lora): path,path
  -h, --help`;

function list(s: string | undefined): string[] {
  return s
    ? s
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean)
    : [];
}

function oneOf<T extends string>(name: string, s: string | undefined, allowed: readonly T[]): T | undefined {
  if (s === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(s))
    throw new Error(`--${name} must be one of ${allowed.join(', ')}, got "${s}"`);
  return s as T;
}

function int(name: string, s: string | undefined, dflt: number): number {
  if (s === undefined) return dflt;
  const n = Number(s);
  if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} must be a non-negative number, got "${s}"`);
  return n;
}

async function main(): Promise<void> {
  const { values: v } = parseArgs({
    options: {
      vllm: { type: 'string' },
      llamacpp: { type: 'string' },
      port: { type: 'string' },
      host: { type: 'string' },
      'base-model': { type: 'string' },
      'lora-modules': { type: 'string' },
      'llama-lora': { type: 'string' },
      'llama-lora-mode': { type: 'string' },
      'llama-no-metrics': { type: 'boolean' },
      'llama-no-slots': { type: 'boolean' },
      'load-read-mbps': { type: 'string' },
      'load-errors': { type: 'string' },
      'context-errors': { type: 'string' },
      unload: { type: 'string' },
      'vllm-metrics': { type: 'string' },
      'vllm-version': { type: 'string' },
      'vllm-frontend': { type: 'string' },
      'api-servers': { type: 'string' },
      'resolver-dir': { type: 'string' },
      'adapter-dir': { type: 'string' },
      'no-runtime-loading': { type: 'boolean' },
      'max-loras': { type: 'string' },
      'max-cpu-loras': { type: 'string' },
      'max-num-seqs': { type: 'string' },
      'load-ms': { type: 'string' },
      'time-scale': { type: 'string' },
      'error-style': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (v.help) {
    console.log(HELP);
    return;
  }
  const port = int('port', v.port, 0);
  const common: ReplicaOptions = {
    host: v.host,
    baseModel: v['base-model'],
    adapterDirs: [v['adapter-dir'] ?? '/adapters'],
    timeScale: int('time-scale', v['time-scale'], 1) || 1,
    errorStyle: oneOf('error-style', v['error-style'], ['nested', 'flat'] as const),
    loadErrors: oneOf('load-errors', v['load-errors'], ['released', 'main'] as const),
    contextErrors: oneOf('context-errors', v['context-errors'], ['released', 'renderer'] as const),
    unload: oneOf('unload', v.unload, ['registry', 'frees'] as const),
    vllmMetrics: oneOf('vllm-metrics', v['vllm-metrics'], [
      'released',
      'by-reason',
      'residency',
      'no-stats',
    ] as const),
    vllmVersion: v['vllm-version'],
    vllmFrontend: oneOf('vllm-frontend', v['vllm-frontend'], ['python', 'rust'] as const),
    apiServers: int('api-servers', v['api-servers'], 1),
    resolverDir: v['resolver-dir'],
    llamaLora: oneOf('llama-lora-mode', v['llama-lora-mode'], [
      'clear',
      'empty-is-absent',
      'listed-only',
    ] as const),
    llamaMetrics: !v['llama-no-metrics'],
    llamaSlots: !v['llama-no-slots'],
    engine: {
      maxLoras: int('max-loras', v['max-loras'], 4),
      maxCpuLoras: int('max-cpu-loras', v['max-cpu-loras'], 8),
      maxNumSeqs: int('max-num-seqs', v['max-num-seqs'], 16),
      loadBaseMs: int('load-ms', v['load-ms'], defaultLoadCost.loadBaseMs),
      loadReadMBps: int('load-read-mbps', v['load-read-mbps'], defaultLoadCost.loadReadMBps) || Infinity,
    },
  };
  const vllmStatic: StaticAdapter[] = list(v['lora-modules']).map((m) => {
    const [name, path] = m.split('=');
    if (!name || !path) throw new Error(`--lora-modules entries are name=path, got "${m}"`);
    return { name, path };
  });
  const specs: ReplicaOptions[] = [];
  let next = port;
  const take = () => (port === 0 ? 0 : next++);
  for (let i = 0; i < int('vllm', v.vllm, 2); i++) {
    specs.push({
      ...common,
      backend: 'vllm',
      port: take(),
      staticAdapters: vllmStatic,
      runtimeLoading: !v['no-runtime-loading'],
    });
  }
  for (let i = 0; i < int('llamacpp', v.llamacpp, 0); i++) {
    const files = list(v['llama-lora']).map((path) => ({ path }));
    specs.push({
      ...common,
      backend: 'llamacpp',
      port: take(),
      staticAdapters: files,
      engine: { ...common.engine, maxLoras: Infinity, maxCpuLoras: Infinity },
    });
  }
  const fleet = await SimFleet.start(specs);
  for (const r of fleet.replicas) console.log(`${r.backend.padEnd(8)} ${r.url}`);
  console.log('Ctrl-C stops the fleet.');
  const stop = () => {
    void fleet.stop().then(() => process.exit(0));
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main().catch((err: Error) => {
  console.error(`sim: ${err.message}`);
  process.exit(1);
});
