import { BackendError } from '../backends/errors';
import { HttpReplicaApi, parseLoraAdapters, parseModels } from '../backends/http-replica-api';
import type { ReplicaHttp } from '../backends/http';
import { AdapterNotFoundError, AdapterRejectedError } from '../backends/replica-api';
import type { Backend } from '../fleet/types';
import { forEachSample } from '../metrics/prometheus';
import { summedOverProcesses } from '../metrics/replica-load';
import { LLAMACPP_SIGNALS, VLLM_FAMILIES, VLLM_SIGNALS, type SignalId } from './signals';

export interface Finding {
  /** `error`: the router cannot do its job there (the fleet is unfit); `warn`: it runs on a fallback. */
  level: 'error' | 'warn' | 'info';
  text: string;
}

export interface SignalCheck {
  id: SignalId;
  source: string;
  exported: boolean;
  /** What the router does without it; only when not exported. */
  without?: string;
}

/** One replica as the preflight check sees it (`kong-lora-router doctor`, lora-poller's start). */
export interface ReplicaCheck {
  url: string;
  backend: Backend | 'unknown';
  /** vLLM's `GET /version`; undefined when the replica does not say. */
  version?: string;
  /** vLLM's Rust API server (`VLLM_USE_RUST_FRONTEND=1`): its `/version` adds `rust_frontend_version`. */
  rustFrontend?: boolean;
  reachable: boolean;
  /** vLLM: `VLLM_ALLOW_RUNTIME_LORA_UPDATING` (the load/unload routes answer); false on llama.cpp. */
  runtimeLora?: boolean;
  signals: SignalCheck[];
  /** vLLM `--max-loras`, from `vllm:lora_requests_info`'s `max_lora` label. */
  maxLoras?: number;
  /** The router's `max_loaded_adapters` this was checked against. */
  maxLoadedAdapters?: number;
  /** vLLM `enable_prefix_caching` from `vllm:cache_config_info`. */
  prefixCaching?: boolean;
  /** API server processes, when more than one shows (summed `lora_requests_info` timestamps). */
  apiServers?: number;
  tryLoad?: TryLoad;
  findings: Finding[];
  fit: boolean;
}

export interface TryLoad {
  adapter: string;
  path: string;
  outcome: 'loaded and unloaded' | 'already loaded' | 'failed';
  loadMs?: number;
  unloadMs?: number;
  error?: string;
}

export interface CheckOptions {
  /** Known from configuration; detected from the replica's routes when absent. */
  backend?: Backend;
  /** The router's `max_loaded_adapters` for this replica, when known. */
  maxLoadedAdapters?: number;
  timeoutMs: number;
  /** Unix seconds now: tells summed `lora_requests_info` timestamps from one process's. */
  nowUnix: number;
  /** Time source for `tryLoad`'s figures (ms). */
  now: () => number;
  /** Load this adapter, time it, and unload it: the only change the check ever makes. */
  tryLoad?: { name: string; path: string };
}

/**
 * Reads one replica, changing nothing on it (unless asked to try a load): its backend, version,
 * the signals the router reads (src/metrics/replica-load.ts) and the settings that bound it.
 */
export async function checkReplica(http: ReplicaHttp, url: string, o: CheckOptions): Promise<ReplicaCheck> {
  const out: ReplicaCheck = {
    url,
    backend: o.backend ?? 'unknown',
    reachable: false,
    signals: [],
    findings: [],
    fit: false,
  };
  try {
    await probe(http, url, o, out);
  } catch (err) {
    const e = err as Error;
    out.findings.push({
      level: 'error',
      text: e instanceof BackendError && e.code !== 'http' ? `unreachable: ${e.message}` : e.message,
    });
  }
  out.fit = out.reachable && !out.findings.some((f) => f.level === 'error');
  return out;
}

async function probe(http: ReplicaHttp, url: string, o: CheckOptions, out: ReplicaCheck): Promise<void> {
  const get = (path: string) => http.call('GET', `${url}${path}`, o.timeoutMs);
  const models = await get('/v1/models');
  out.reachable = true;
  if (out.backend === 'unknown') out.backend = await detectBackend(get, models.text);
  if (o.maxLoadedAdapters !== undefined) out.maxLoadedAdapters = o.maxLoadedAdapters;
  if (out.backend === 'llamacpp') return probeLlamacpp(get, out);
  // `{"version": VLLM_VERSION}` (show_version; docs/replica-apis.md says where and what was read); the Rust
  // frontend adds `rust_frontend_version` (rust/src/server/src/routes/version.rs).
  const version = await get('/version');
  if (version.status === 200) {
    const v = jsonField(version.text, 'version');
    if (typeof v === 'string') out.version = v;
    if (typeof jsonField(version.text, 'rust_frontend_version') === 'string') {
      out.rustFrontend = true;
      out.findings.push({
        level: 'info',
        text: "Rust frontend: an unload frees the adapter's weights; a local lora_path loads only under VLLM_RUNTIME_LORA_ALLOWED_PATH_PREFIXES (try --try-load)",
      });
    }
  }
  const maxModelLen = models.status === 200 ? parseModels(models.text).maxModelLen : undefined;
  const metrics = await get('/metrics');
  const m = metrics.status === 200 ? readFamilies(metrics.text) : undefined;
  for (const s of VLLM_SIGNALS) {
    const exported =
      s.id === 'max_model_len'
        ? maxModelLen !== undefined
        : m !== undefined && VLLM_FAMILIES[s.id].every((any) => any.some((f) => m.names.has(f)));
    out.signals.push({ id: s.id, source: s.source, exported, ...(exported ? {} : { without: s.without }) });
  }
  if (!m)
    out.findings.push({
      level: 'warn',
      text: `/metrics answered ${metrics.status}: every signal below is missing`,
    });
  else if (![...m.names].some((n) => n.startsWith('vllm:')))
    out.findings.push({
      level: 'warn',
      text: 'no vllm: metric at all (--disable-log-stats?): the router runs on its own counts',
    });
  if (m?.maxLora !== undefined) out.maxLoras = m.maxLora;
  if (m?.prefixCaching !== undefined) out.prefixCaching = m.prefixCaching;
  // A gauge summed over processes (Prometheus multiprocess mode): its timestamps add up.
  if (m?.loraInfoMax !== undefined && summedOverProcesses(m.loraInfoMax, o.nowUnix)) {
    out.apiServers = Math.round(m.loraInfoMax / o.nowUnix);
    out.findings.push({
      level: 'warn',
      text: `${out.apiServers} API server processes (--api-server-count): lora_requests_info's timestamps add up, so the replica's word on busy adapters is wrong; unloads rest on the router's leases`,
    });
  }
  out.runtimeLora = await runtimeLoraOn(http, url, o.timeoutMs);
  if (!out.runtimeLora)
    out.findings.push({
      level: 'error',
      text: 'runtime LoRA loading is off (VLLM_ALLOW_RUNTIME_LORA_UPDATING unset): only its --lora-modules are served, no adapter can be loaded on demand',
    });
  budgetFindings(out);
  if (out.prefixCaching && !out.signals.find((s) => s.id === 'computed_tokens')?.exported)
    out.findings.push({
      level: 'warn',
      text: 'prefix caching is on and computed tokens are not exported: the learned prefill rate counts cache hits as work done',
    });
  if (o.tryLoad && out.runtimeLora) out.tryLoad = await tryLoad(http, url, o.tryLoad, o);
  if (out.tryLoad?.outcome === 'failed')
    out.findings.push({
      level: 'error',
      text: `try-load of ${out.tryLoad.adapter} failed: ${out.tryLoad.error}`,
    });
}

/**
 * `max_loaded_adapters` against `--max-loras` (GPU slots) and `--max-cpu-loras` (the CPU LRU),
 * which vLLM sets to `--max-loras` when not given (LoRAConfig._validate_lora_config,
 * vllm/config/lora.py, read on main; `LoRAConfig.__post_init__` at vLLM v0.11.0) and exports nowhere.
 */
function budgetFindings(out: ReplicaCheck): void {
  const n = out.maxLoadedAdapters;
  const slots = out.maxLoras;
  if (n === undefined || slots === undefined) {
    out.findings.push({
      level: 'info',
      text: `--max-cpu-loras is not exported by vLLM: keep it >= max_loaded_adapters${n === undefined ? '' : ` (${n})`}, or adapters are evicted from its CPU cache and read again from storage inside the engine loop`,
    });
    return;
  }
  if (n > slots)
    out.findings.push({
      level: 'warn',
      text: `max_loaded_adapters ${n} > --max-loras ${slots}: at most ${slots} adapters run in one batch, the rest wait; --max-cpu-loras (not exported, default --max-loras) must be >= ${n}, or its CPU cache evicts adapters the router counts as loaded`,
    });
  else
    out.findings.push({
      level: 'info',
      text: `max_loaded_adapters ${n} <= --max-loras ${slots}: every adapter the router loads fits the GPU slots`,
    });
}

async function probeLlamacpp(
  get: (path: string) => Promise<{ status: number; text: string }>,
  out: ReplicaCheck,
): Promise<void> {
  out.runtimeLora = false;
  const metrics = await get('/metrics');
  const names = metrics.status === 200 ? readFamilies(metrics.text).names : new Set<string>();
  const has: Record<string, boolean> = {
    queue: names.has('llamacpp:requests_processing') && names.has('llamacpp:requests_deferred'),
    mean_prompt: names.has('llamacpp:prompt_tokens_total'),
    max_model_len: false,
  };
  for (const s of LLAMACPP_SIGNALS) {
    const exported = has[s.id] ?? false;
    out.signals.push({ id: s.id, source: s.source, exported, ...(exported ? {} : { without: s.without }) });
  }
  if (metrics.status !== 200) {
    const slots = await get('/slots');
    out.findings.push({
      level: 'warn',
      text: `/metrics answered ${metrics.status} (llama-server without --metrics): load from ${slots.status === 200 ? '/slots (busy slots, no queue)' : '/health alone (no figures)'}`,
    });
  }
  out.findings.push({
    level: 'info',
    text: 'llama.cpp loads adapters only at start (--lora): the router serves those, never loads',
  });
}

async function detectBackend(
  get: (path: string) => Promise<{ status: number; text: string }>,
  modelsText: string,
): Promise<Backend> {
  if (/"owned_by"\s*:\s*"llamacpp"/.test(modelsText)) return 'llamacpp';
  const r = await get('/lora-adapters');
  if (r.status !== 200) return 'vllm';
  try {
    parseLoraAdapters(r.text);
    return 'llamacpp';
  } catch {
    return 'vllm';
  }
}

/**
 * Whether vLLM's load/unload routes exist (registered only with
 * `VLLM_ALLOW_RUNTIME_LORA_UPDATING`): a GET of the POST-only load route answers Starlette's 405
 * when the route is there (Route.matches gives a partial match, starlette/routing.py), FastAPI's
 * 404 `{"detail":"Not Found"}` when it is not. A GET runs no handler: nothing changes.
 */
async function runtimeLoraOn(http: ReplicaHttp, url: string, timeoutMs: number): Promise<boolean> {
  const r = await http.call('GET', `${url}/v1/load_lora_adapter`, timeoutMs);
  return r.status === 405;
}

async function tryLoad(
  http: ReplicaHttp,
  url: string,
  adapter: { name: string; path: string },
  o: CheckOptions,
): Promise<TryLoad> {
  const api = new HttpReplicaApi(http);
  const base = { adapter: adapter.name, path: adapter.path };
  const started = o.now();
  try {
    const loaded = await api.loadAdapter(url, adapter.name, adapter.path, o.timeoutMs);
    // Someone else's copy: left in place, and a load that did nothing is no figure.
    if (loaded === 'already-loaded') return { ...base, outcome: 'already loaded' };
  } catch (err) {
    const e = err as Error;
    const why = e instanceof AdapterNotFoundError || e instanceof AdapterRejectedError ? 'the adapter: ' : '';
    return { ...base, outcome: 'failed', error: why + e.message };
  }
  const loadMs = o.now() - started;
  const unloadStart = o.now();
  try {
    await api.unloadAdapter(url, adapter.name, o.timeoutMs);
  } catch (err) {
    return {
      ...base,
      outcome: 'failed',
      loadMs,
      error: `loaded, but the unload failed: ${(err as Error).message}`,
    };
  }
  return { ...base, outcome: 'loaded and unloaded', loadMs, unloadMs: o.now() - unloadStart };
}

interface Families {
  names: Set<string>;
  maxLora?: number;
  prefixCaching?: boolean;
  loraInfoMax?: number;
}

/** The families present, and the labels that carry vLLM's settings (vllm/v1/metrics/loggers.py). */
function readFamilies(text: string): Families {
  const out: Families = { names: new Set() };
  forEachSample(text, (name, labels, value) => {
    out.names.add(name);
    if (name === 'vllm:lora_requests_info') {
      const n = Number(labels.max_lora);
      if (Number.isInteger(n) && n > 0) out.maxLora = n;
      if (Number.isFinite(value)) out.loraInfoMax = Math.max(out.loraInfoMax ?? 0, value);
    } else if (name === 'vllm:cache_config_info' && labels.enable_prefix_caching !== undefined) {
      out.prefixCaching = labels.enable_prefix_caching === 'True';
    }
  });
  return out;
}

function jsonField(text: string, key: string): unknown {
  try {
    return (JSON.parse(text) as Record<string, unknown>)?.[key];
  } catch {
    return undefined;
  }
}
