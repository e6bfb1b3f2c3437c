import {
  noLoadFigures,
  readLlamacppLoad,
  readLlamacppSlots,
  readVllmLoad,
  scanVllmMetrics,
  vllmLoadOf,
  type ReplicaLoad,
  type VllmScan,
} from '../metrics/replica-load';
import type { LlamaAdapter, ReplicaSpec } from '../fleet/types';
import { BackendError } from './errors';
import { ReplicaHttp, replicaMessage, type HttpReply } from './http';
import {
  AdapterNotFoundError,
  AdapterRejectedError,
  type LoadOutcome,
  type ReplicaActivity,
  type ReplicaApi,
  type Scrape,
  type UnloadOutcome,
} from './replica-api';

/**
 * vLLM's texts for a load that fails on the adapter itself, which vLLM answers 500
 * InternalServerError since #36201 (v0.18.0 by its release window; `load_lora_adapter`,
 * vllm/entrypoints/openai/models/serving.py: read at v0.19.0, where the text keeps the "Call to
 * add_lora method failed: " prefix, and at main 00153c8b79, without it): the rank and
 * extra-vocabulary checks (vllm/lora/peft_helper.py and worker_manager.py, vLLM v0.11.0) and PEFTHelper's
 * feature and field checks of adapter_config.json
 * (vllm/lora/peft_helper.py, vLLM v0.11.0). Any other 500 is the replica's (an engine that
 * died or restarted, out of memory).
 */
const ADAPTER_FAULT =
  /is greater than max_lora_rank|is greater than lora_extra_vocab_size|only supports modules_to_save being None|does not yet support DoRA|Missing required configuration fields/;

/** vLLM and llama.cpp over HTTP (see docs/replica-apis.md for every status handled here). */
export class HttpReplicaApi implements ReplicaApi {
  /**
   * Each vLLM replica's last answers and what was read from them: an answer the same as the last
   * one (an idle replica's `/metrics`, a `/v1/models` between loads) is not parsed again. Only
   * the walk of the text is kept; what depends on the poll (the replica's time, the names asked
   * about) is read afresh each time, so the outcome is the same as reading the text again.
   */
  private readonly lastRead = new Map<string, LastRead>();

  /** `http`: its connections, shared with the preflight check (src/doctor). */
  constructor(readonly http = new ReplicaHttp()) {}

  forget(url: string): void {
    this.lastRead.delete(url);
  }

  async scrape(replica: ReplicaSpec, timeoutMs: number): Promise<Scrape> {
    const { url, backend } = replica;
    if (backend === 'llamacpp') {
      const [load, adapters] = await Promise.all([
        this.llamaLoad(url, timeoutMs),
        this.get(`${url}/lora-adapters`, timeoutMs),
      ]);
      return { load, llamaAdapters: parseLoraAdapters(adapters) };
    }
    const [metrics, models] = await Promise.all([
      this.reply(`${url}/metrics`, timeoutMs),
      this.get(`${url}/v1/models`, timeoutMs),
    ]);
    const last = this.lastRead.get(url);
    const m = last?.modelsText === models ? last.models : frozenModels(parseModels(models));
    const scan = last?.metricsText === metrics.text ? last.scan : scanVllmMetrics(metrics.text);
    if (last === undefined && this.lastRead.size >= LAST_READ_MAX) this.lastRead.clear();
    this.lastRead.set(url, { metricsText: metrics.text, scan, modelsText: models, models: m });
    return {
      // Read for every adapter it holds: one named with a comma renews its leases while it runs.
      load: vllmLoadOf(
        scan,
        m.adapters.map((a) => a.name),
        metrics.dateS,
      ),
      registry: m.adapters as { name: string; path: string }[],
      ...(m.maxModelLen === undefined ? {} : { maxModelLen: m.maxModelLen }),
    };
  }

  /**
   * Every vLLM answer to a load (vllm/entrypoints/openai/serving_models.py, v0.8 to v0.27 and
   * main; docs/replica-apis.md): any 200 is success, whatever its body. Released versions wrap
   * engine failures as "Call to add_lora method failed: ...", so texts are matched anywhere.
   */
  async loadAdapter(url: string, name: string, path: string, timeoutMs: number): Promise<LoadOutcome> {
    const r = await this.http.call('POST', `${url}/v1/load_lora_adapter`, timeoutMs, {
      lora_name: name,
      lora_path: path,
    });
    if (r.status === 200) return 'loaded';
    const message = replicaMessage(r.text);
    // Another router (or an earlier timed-out call of ours) loaded it: that is success. Newer
    // text goes on with a `load_inplace` hint; the Rust frontend says "LoRA adapter `a` is already
    // loaded" (`LoadLoraError::AlreadyLoaded`, rust/src/server/src/lora.rs; docs/replica-apis.md).
    if (r.status === 400 && /has already been loaded|is already loaded/.test(message))
      return 'already-loaded';
    if (r.status < 500 && /No adapter found/i.test(message)) throw new AdapterNotFoundError(message);
    // Any other 400 (rank above --max-lora-rank, bad adapter_config.json, a validation error):
    // this adapter cannot be loaded as asked; the replica is fine. Since vLLM #36201 (v0.18.0) the same
    // failures answer 500: the adapter's fault is then told apart by vLLM's own texts.
    if (r.status === 400 || (r.status === 500 && ADAPTER_FAULT.test(message)))
      throw new AdapterRejectedError(message);
    throw new BackendError('http', message, r.status);
  }

  async unloadAdapter(url: string, name: string, timeoutMs: number): Promise<UnloadOutcome> {
    const r = await this.http.call('POST', `${url}/v1/unload_lora_adapter`, timeoutMs, { lora_name: name });
    if (r.status === 200) return 'unloaded';
    const message = replicaMessage(r.text);
    // The Rust frontend answers an unknown name as an unknown model (`UnloadLoraError::NotFound` →
    // `ApiError::model_not_found`, rust/src/server/src/routes/lora.rs).
    if (r.status === 404 && /cannot be found|does not exist/.test(message)) return 'absent';
    throw new BackendError('http', message, r.status);
  }

  /**
   * The replica's own word on what runs there: `vllm:lora_requests_info` lists the adapters with
   * requests running or waiting (labels `running_lora_adapters`, `waiting_lora_adapters`, set on
   * every stats record, vllm/v1/metrics/loggers.py, vLLM v0.11.0; an adapter leaves them when
   * its last request finishes, LoRARequestStates in vllm/v1/metrics/stats.py, v0.11.0 to v0.19.0).
   * Without that gauge (`--disable-log-stats`: no stat loggers at all, vllm/v1/engine/async_llm.py,
   * vLLM v0.11.0) the replica cannot say. The newer residency families (`vllm:lora_adapter_loaded`)
   * say what is loaded, not what runs: they cannot speak for a request.
   */
  async activity(url: string, timeoutMs: number, names?: readonly string[]): Promise<ReplicaActivity> {
    const metrics = await this.reply(`${url}/metrics`, timeoutMs);
    const load = readVllmLoad(metrics.text, names, metrics.dateS);
    // A line no Prometheus client writes (a proxy's page, quotes lost, a line cut short) may be
    // the series naming a running adapter: such a text is no word, neither "idle" nor "cannot
    // say" (where the lease rules alone decide). The simulation's seed 102764. A well-formed line
    // is `name{label="value",...} value [timestamp]`, label values in double quotes (the grammar:
    // prometheus/docs content/docs/instrumenting/exposition_formats.md at commit a3a0fda, a repository
    // without release tags; Prometheus's own parser refuses a label value without its opening quote:
    // prometheus/common expfmt/text_parse.go `startLabelValue` at tag v0.62.0).
    if (load.malformedLines > 0)
      throw new BackendError(
        'protocol',
        `GET ${url}/metrics: ${load.malformedLines} line(s) unreadable: what runs there cannot be read`,
      );
    return load.reportsActivity ? { busy: load.activeAdapters } : {};
  }

  /**
   * What the replica holds, in its own word: vLLM's `/v1/models` lists every LoRA adapter in its
   * registry (`show_available_models` adds one card per entry of `lora_requests`, parent = the
   * base model; vllm/entrypoints/openai/serving_models.py, vLLM v0.11.0), which
   * `load_lora_adapter` fills and `unload_lora_adapter` empties. A server whose list has no
   * adapter cards at all (llama.cpp's single model card) says nothing the limit can use.
   */
  async residency(url: string, timeoutMs: number): Promise<{ name: string; path: string }[] | undefined> {
    return parseModels(await this.get(`${url}/v1/models`, timeoutMs)).adapters;
  }

  close(): Promise<void> {
    return this.http.close();
  }

  /**
   * llama.cpp's load figures: `/metrics` needs `--metrics` (501 `not_supported_error` without);
   * then busy slots from `/slots` (501 with `--no-slots`); then `/health` alone, with no figures.
   */
  private async llamaLoad(url: string, timeoutMs: number): Promise<ReplicaLoad> {
    for (const [path, read] of [
      ['/metrics', readLlamacppLoad],
      ['/slots', readLlamacppSlots],
    ] as const) {
      const r = await this.http.call('GET', `${url}${path}`, timeoutMs);
      if (r.status === 200) return read(r.text);
      if (r.status !== 501)
        throw new BackendError('http', `GET ${url}${path}: ${r.status} ${replicaMessage(r.text)}`, r.status);
    }
    await this.get(`${url}/health`, timeoutMs);
    return noLoadFigures();
  }

  private async get(url: string, timeoutMs: number): Promise<string> {
    return (await this.reply(url, timeoutMs)).text;
  }

  /** A 200 answer with its `Date` (vLLM's /metrics: the clock its gauges' times are on). */
  private async reply(url: string, timeoutMs: number): Promise<HttpReply> {
    const r = await this.http.call('GET', url, timeoutMs);
    if (r.status !== 200)
      throw new BackendError('http', `GET ${url}: ${r.status} ${replicaMessage(r.text)}`, r.status);
    return r;
  }
}

/** A vLLM replica's last `/metrics` and `/v1/models` answers, and what was read from them. */
interface LastRead {
  metricsText: string;
  scan: VllmScan;
  modelsText: string;
  models: Models;
}

/** Replicas whose last answers are kept: past it (replicas come and go) all are dropped and read again. */
const LAST_READ_MAX = 1024;

type Models = ReturnType<typeof parseModels>;

/** The registry frozen: a poll hands it to the store, and the next poll may hand it on again. */
function frozenModels(m: Models): Models {
  for (const a of m.adapters) Object.freeze(a);
  Object.freeze(m.adapters);
  return Object.freeze(m);
}

/** vLLM `GET /v1/models`: the base card (parent null), then adapters (parent = base). */
export function parseModels(text: string): {
  base?: string;
  adapters: { name: string; path: string }[];
  maxModelLen?: number;
} {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new BackendError('protocol', '/v1/models did not answer JSON');
  }
  const data = (body as { data?: unknown })?.data;
  if (!Array.isArray(data)) throw new BackendError('protocol', '/v1/models has no data list');
  let base: string | undefined;
  let maxModelLen: number | undefined;
  const adapters: { name: string; path: string }[] = [];
  for (const card of data as Record<string, unknown>[]) {
    if (typeof card?.id !== 'string') continue;
    if (card.parent === null || card.parent === undefined) {
      base ??= card.id;
      // The base card's ModelCard.max_model_len (serving_models.py show_available_models, vLLM
      // v0.11.0); adapter cards carry null.
      const len = card.max_model_len;
      if (maxModelLen === undefined && typeof len === 'number' && len > 0) maxModelLen = len;
    } else adapters.push({ name: card.id, path: typeof card.root === 'string' ? card.root : '' });
  }
  return { base, adapters, ...(maxModelLen === undefined ? {} : { maxModelLen }) };
}

/** llama.cpp `GET /lora-adapters`: `[{id, path, scale}]`. */
export function parseLoraAdapters(text: string): LlamaAdapter[] {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new BackendError('protocol', '/lora-adapters did not answer JSON');
  }
  if (!Array.isArray(body)) throw new BackendError('protocol', '/lora-adapters is not a list');
  const out: LlamaAdapter[] = [];
  for (const e of body as Record<string, unknown>[]) {
    if (typeof e?.id === 'number' && typeof e.path === 'string') out.push({ id: e.id, path: e.path });
  }
  return out;
}
