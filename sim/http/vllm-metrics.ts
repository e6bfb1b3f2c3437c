import type { EngineStats, RequestRecord } from '../engine/engine';
import type { ReplicaContext, VllmMetrics } from './context';
import {
  loraInfoKey,
  processMetricsText,
  TTFT_BUCKETS,
  vllmMetricsText,
  type VllmMetricsInput,
} from './metrics-text';

/**
 * What a vLLM replica's /metrics accumulates between scrapes (vllm/v1/metrics/loggers.py): the
 * TTFT histogram, the `lora_requests_info` series (one per label set, never removed), and in
 * mode `residency` the residency families of PR vllm#45411.
 */
export class VllmMetricsState {
  /** Per API server process, the `lora_requests_info` series it has set (one process unless `apiServers`). */
  private readonly processes: { info: Map<string, number>; last: string }[];
  private statsDelivered = 0;
  private ttftCounts = TTFT_BUCKETS.map(() => 0);
  private ttftSum = 0;
  private ttftCount = 0;
  /** The last text rendered, with its input (see `text`) and its `lora_requests_info` series then. */
  private rendered: { input: VllmMetricsInput; loraInfo: [string, number][]; text: string } | null = null;

  constructor(
    private readonly r: ReplicaContext,
    private readonly createdUnix: number,
  ) {
    this.processes = Array.from({ length: r.o.apiServers }, () => ({ info: new Map(), last: '' }));
  }

  /**
   * vLLM observes a request's TTFT in the output pass of the engine step that made its first
   * token, not at its finish (IterationStats.update_from_output, vllm/v1/metrics/stats.py;
   * PrometheusStatLogger.record, vllm/v1/metrics/loggers.py, vLLM v0.11.0): a request decoding,
   * or aborted later, is counted already.
   */
  firstToken(rec: RequestRecord): void {
    if (rec.firstToken === undefined) return;
    const s = (rec.firstToken - rec.arrival) / 1000;
    this.ttftSum += s;
    this.ttftCount++;
    const i = TTFT_BUCKETS.findIndex((le) => s <= le);
    if (i >= 0) this.ttftCounts[i]!++;
  }

  text(): string {
    const { r } = this;
    if (r.o.vllmMetrics === 'no-stats') return processMetricsText();
    // One snapshot of the engine per scrape: the text, the residency and the lora info agree.
    const stats = r.engine.stats();
    const input: VllmMetricsInput = {
      model: r.o.baseModel,
      stats,
      maxLoras: r.engine.options.maxLoras,
      loraInfo: this.currentLoraInfo(stats),
      ttftCounts: this.ttftCounts,
      ttftSum: this.ttftSum,
      ttftCount: this.ttftCount,
      createdUnix: this.createdUnix,
      emitDeprecatedKvMetric: r.o.deprecatedKvMetric,
      kvCapacityTokens: r.engine.options.kvCapacityTokens,
      residency: r.o.vllmMetrics === 'residency' ? this.residency(stats) : undefined,
      waitingByReason: r.o.vllmMetrics === 'by-reason',
      computedTokens: exportsComputedTokens(r.o.vllmMetrics),
    };
    // The text is a function of its input: an idle replica's scrapes (most of them) render it
    // once. The TTFT histogram changes only with its count, so the count stands for it.
    const last = this.rendered;
    if (last && sameInput(last.input, input) && sameSeries(last.loraInfo, input.loraInfo)) return last.text;
    this.rendered = { input, loraInfo: [...input.loraInfo], text: vllmMetricsText(input) };
    return this.rendered.text;
  }

  /**
   * What the residency metrics report: every copy in the CPU cache under its name (a copy left
   * by an unload still counts: it still holds memory), the `max_loras` most recent also on the GPU.
   */
  private residency(stats: EngineStats): { adapter: string; level: 'gpu' | 'cpu'; pinned: boolean }[] {
    const cached = stats.cachedAdapters;
    const gpu = new Set(cached.slice(-this.r.engine.options.maxLoras));
    const name = (w: string) => (w.includes('#') ? w.slice(0, w.lastIndexOf('#')) : w);
    return cached.flatMap((w) => [
      ...(gpu.has(w) ? [{ adapter: name(w), level: 'gpu' as const, pinned: false }] : []),
      { adapter: name(w), level: 'cpu' as const, pinned: false },
    ]);
  }

  /**
   * vLLM sets the current `vllm:lora_requests_info` label set to the time on every stats record
   * (here: when the running/waiting sets change); old label sets stay. With several API server
   * processes (`--api-server-count`), the engine returns each step's stats to one front-end only
   * ("Return stats to only one of the front-ends", `Scheduler.update_from_output`,
   * vllm/v1/core/sched/scheduler.py), here the next process in turn at each scrape, and
   * Prometheus' multiprocess mode sums each label set over the processes (`multiprocess_mode="sum"`,
   * vllm/v1/metrics/loggers.py): the values add up, and the set every process has seen (idle) wins.
   */
  private currentLoraInfo(s: EngineStats): Map<string, number> {
    const key = loraInfoKey(this.r.engine.options.maxLoras, s.runningAdapters, s.waitingAdapters);
    const p = this.processes[this.statsDelivered++ % this.processes.length]!;
    if (key !== p.last || !p.info.has(key)) {
      p.last = key;
      p.info.set(key, this.r.nowUnix());
    }
    if (this.processes.length === 1) return p.info;
    const summed = new Map<string, number>();
    for (const q of this.processes) for (const [k, at] of q.info) summed.set(k, (summed.get(k) ?? 0) + at);
    return summed;
  }
}

/**
 * Whether a mode's vLLM exports the computed-token families (`computedTokenFamilies` in
 * metrics-text.ts, vLLM PRs #30189 and #33290, both merged before PR #38435): the modes of
 * v0.20.0 and later (PR #38435's release) do; `released` (v0.11.0 to v0.19.x) does not, although
 * v0.16.0 to v0.19.x already export `prompt_tokens_by_source` (PR #33290 is in v0.16.0).
 */
export function exportsComputedTokens(mode: VllmMetrics): boolean {
  return mode === 'by-reason' || mode === 'residency';
}

/**
 * Whether two scrapes' inputs render the same text: every field but the TTFT buckets (their count
 * stands for them) and the `lora_requests_info` series (a map the state changes in place: `sameSeries`).
 */
function sameInput(a: VllmMetricsInput, b: VllmMetricsInput): boolean {
  for (const k in b) {
    if (k === 'loraInfo' || k === 'ttftCounts') continue;
    if (!sameData(a[k as keyof VllmMetricsInput], b[k as keyof VllmMetricsInput])) return false;
  }
  return true;
}

/** Plain data (numbers, strings, booleans, arrays and objects of them) equal field by field. */
function sameData(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameData(a[i], b[i])) return false;
    return true;
  }
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  let n = 0;
  for (const k in y) {
    n++;
    if (!sameData(x[k], y[k])) return false;
  }
  for (const _ in x) n--;
  return n === 0;
}

function sameSeries(kept: [string, number][], now: Map<string, number>): boolean {
  if (kept.length !== now.size) return false;
  let i = 0;
  for (const [k, at] of now) {
    const e = kept[i++]!;
    if (e[0] !== k || e[1] !== at) return false;
  }
  return true;
}
