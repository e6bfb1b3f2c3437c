import type { EngineStats, RequestRecord } from '../engine/engine';
import type { ReplicaContext, VllmMetrics } from './context';
import { loraInfoKey, processMetricsText, TTFT_BUCKETS, vllmMetricsText } from './metrics-text';

/**
 * What a vLLM replica's /metrics accumulates between scrapes (vllm/v1/metrics/loggers.py): the
 * TTFT histogram, the `lora_requests_info` series (one per label set, never removed), and in
 * mode `residency` the residency families of PR vllm#45411.
 */
export class VllmMetricsState {
  private loraInfo = new Map<string, number>();
  private lastLoraKey = '';
  private ttftCounts = TTFT_BUCKETS.map(() => 0);
  private ttftSum = 0;
  private ttftCount = 0;

  constructor(
    private readonly r: ReplicaContext,
    private readonly createdUnix: number,
  ) {}

  record(rec: RequestRecord): void {
    if (rec.firstToken === undefined || rec.aborted) return;
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
    return vllmMetricsText({
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
    });
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

  /** vLLM adds a `vllm:lora_requests_info` series whenever the running/waiting sets change. */
  private currentLoraInfo(s: EngineStats): Map<string, number> {
    const key = loraInfoKey(this.r.engine.options.maxLoras, s.runningAdapters, s.waitingAdapters);
    if (key !== this.lastLoraKey || !this.loraInfo.has(key)) {
      this.lastLoraKey = key;
      this.loraInfo.set(key, this.r.nowUnix());
    }
    return this.loraInfo;
  }
}

/**
 * Whether a mode's vLLM exports the computed-token families (`computedTokenFamilies` in
 * metrics-text.ts, vLLM PRs #30189 and #33290, both merged before PR #38435): the modes of
 * releases since PR #38435 do; `released` (v0.11.0) does not.
 */
export function exportsComputedTokens(mode: VllmMetrics): boolean {
  return mode === 'by-reason' || mode === 'residency';
}
