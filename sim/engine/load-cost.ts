/**
 * What loading a LoRA adapter's weights costs a replica: its bytes (rank x the base model's
 * linear layer shapes x dtype) over the read bandwidth of where the adapters live, plus a fixed
 * overhead (open, parse the safetensors header, allocate, copy to the GPU). vLLM reads the
 * weights in `LoRAModel.from_local_checkpoint` (vllm/lora/models.py, v0.11-v0.27) inside the
 * EngineCore busy loop, so the load blocks engine steps (see docs/replica-apis.md).
 */

/** The shapes of a decoder's linear layers (Hugging Face `config.json` names). */
export interface BaseModelShape {
  name: string;
  hiddenSize: number;
  intermediateSize: number;
  layers: number;
  heads: number;
  kvHeads: number;
}

/** meta-llama/Llama-3.1-8B-Instruct's config.json. */
export const LLAMA_3_1_8B: BaseModelShape = {
  name: 'meta-llama/Llama-3.1-8B-Instruct',
  hiddenSize: 4096,
  intermediateSize: 14336,
  layers: 32,
  heads: 32,
  kvHeads: 8,
};

export interface LoadCostOptions {
  /** Fixed cost of one load, ms. */
  loadBaseMs: number;
  /** Read bandwidth of the adapters' storage, MB/s (10^6 bytes). */
  loadReadMBps: number;
  /** The base model the adapters are trained for. */
  baseModel: BaseModelShape;
  /** Bytes per weight (bf16 = 2). */
  dtypeBytes: number;
}

/**
 * Local NVMe (or the page cache): ~2 GB/s of reads plus 60 ms of fixed work, so a rank-16
 * adapter of an 8B model on every linear layer (84 MB in bf16) loads in about 100 ms.
 * Network storage is nearer 100 MB/s (`--load-read-mbps 100`: about 0.9 s).
 */
export const defaultLoadCost: LoadCostOptions = {
  loadBaseMs: 60,
  loadReadMBps: 2000,
  baseModel: LLAMA_3_1_8B,
  dtypeBytes: 2,
};

/** LoRA parameters on every linear layer (q, k, v, o, gate, up, down): r x (in + out) each. */
export function loraParams(m: BaseModelShape, rank: number): number {
  const head = m.hiddenSize / m.heads;
  const kv = head * m.kvHeads;
  const h = m.hiddenSize;
  const i = m.intermediateSize;
  const perLayer = h + h + (h + kv) + (h + kv) + (h + h) + 2 * (h + i) + (i + h);
  return rank * perLayer * m.layers;
}

export function adapterBytes(o: LoadCostOptions, rank: number): number {
  return loraParams(o.baseModel, rank) * o.dtypeBytes;
}

/** Modelled time of one load, ms. */
export function loadMs(o: LoadCostOptions, rank: number): number {
  return o.loadBaseMs + (adapterBytes(o, rank) / (o.loadReadMBps * 1e6)) * 1000;
}

/**
 * The read bandwidth at which an adapter of `rank` loads in `targetMs` with the fixed overhead
 * of `o` (the benchmark's load-time sweep is expressed in load times of its rank-16 adapters).
 */
export function bandwidthFor(o: LoadCostOptions, rank: number, targetMs: number): number {
  if (!(targetMs > o.loadBaseMs))
    throw new RangeError(`load time ${targetMs} ms <= overhead ${o.loadBaseMs} ms`);
  return adapterBytes(o, rank) / 1e6 / ((targetMs - o.loadBaseMs) / 1000);
}

/**
 * Load-cost options under which an adapter of `rank` loads in `targetMs`: the default overhead
 * and the bandwidth that makes up the rest (all overhead when the target is below it).
 */
export function loadCostFor(
  targetMs: number,
  rank: number,
): Pick<LoadCostOptions, 'loadBaseMs' | 'loadReadMBps'> {
  const o = defaultLoadCost;
  if (targetMs <= o.loadBaseMs) return { loadBaseMs: targetMs, loadReadMBps: Infinity };
  return { loadBaseMs: o.loadBaseMs, loadReadMBps: bandwidthFor(o, rank, targetMs) };
}
