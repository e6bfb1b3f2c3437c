import { parseArgs } from 'node:util';
import { SimFleet } from './fleet';
import type { ReplicaOptions, StaticAdapter } from './http/replica';

const HELP = `Usage: npm run sim -- [options]

Starts simulated vLLM and llama.cpp replicas on loopback (see README, "Replica simulator").

  --vllm N               vLLM replicas (default 2)
  --llamacpp N           llama.cpp replicas (default 0)
  --port P               first port; replicas take P, P+1, ... (default 0: ephemeral)
  --host H               address to listen on (default 127.0.0.1; 0.0.0.0 in a container)
  --base-model NAME      base model id (default meta-llama/Llama-3.1-8B-Instruct)
  --lora-modules LIST    vLLM adapters registered at start: name=path,name=path
  --llama-lora LIST      llama.cpp adapter files loaded at start: path,path
  --adapter-dir DIR      any DIR/<name> is a loadable adapter (default /adapters)
  --no-runtime-loading   vLLM without VLLM_ALLOW_RUNTIME_LORA_UPDATING (load routes 404)
  --max-loras N          distinct adapters per batch (default 4)
  --max-cpu-loras N      adapters cached in host memory (default 8)
  --max-num-seqs N       running slots (default 16)
  --load-ms MS           base adapter load time, modelled ms (default 800)
  --time-scale X         divide every modelled duration by X (default 1)
  --error-style STYLE    nested (vLLM >= 0.10.1, default) or flat
  -h, --help`;

function list(s: string | undefined): string[] {
  return s
    ? s
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean)
    : [];
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
    errorStyle: v['error-style'] === 'flat' ? 'flat' : 'nested',
    engine: {
      maxLoras: int('max-loras', v['max-loras'], 4),
      maxCpuLoras: int('max-cpu-loras', v['max-cpu-loras'], 8),
      maxNumSeqs: int('max-num-seqs', v['max-num-seqs'], 16),
      loadBaseMs: int('load-ms', v['load-ms'], 800),
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
