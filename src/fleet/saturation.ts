import type { ReplicaView } from './types';

export interface SaturationPolicy {
  /** Waiting requests per replica at which it counts as full. */
  targetWaitingPerReplica: number;
  /** KV-cache usage at which it counts as full (0..1). */
  kvCeiling: number;
  /**
   * `saturation_mode: predicted`'s `saturation_margin_ms`: what metrics and the status show is
   * then the predicted figure (`replicaSaturations`); unset: the count one.
   */
  predictedMarginMs?: number;
}

/**
 * max(waiting / target_waiting_per_replica, kv_usage / kv_ceiling); >= 1 means saturated.
 * llama.cpp reports no KV usage: its deferred requests (every slot busy) stand in for waiting.
 */
export function saturation(r: Pick<ReplicaView, 'waiting' | 'kvUsage'>, p: SaturationPolicy): number {
  const queue =
    p.targetWaitingPerReplica > 0 ? r.waiting / p.targetWaitingPerReplica : r.waiting > 0 ? Infinity : 0;
  const kv = r.kvUsage === undefined ? 0 : r.kvUsage / p.kvCeiling;
  return Math.max(queue, kv);
}

type Figures = Pick<ReplicaView, 'url' | 'waiting' | 'kvUsage' | 'health'>;

/**
 * Each replica's saturation as its configuration judges it, for metrics and the placement page.
 * `count`: `saturation()`. `predicted`: the holder rule without a request at hand: its
 * predicted wait over what the fastest other replica that is up would take, with a load
 * (`loadMs`) and the margin; >= 1: an adapter held here would spread.
 */
export function replicaSaturations(
  replicas: readonly Figures[],
  policyOf: (url: string) => SaturationPolicy,
  waitMs: (url: string) => number,
  loadMs: number,
): number[] {
  const policies = replicas.map((r) => policyOf(r.url));
  const waits = replicas.map((r, i) => (policies[i]!.predictedMarginMs === undefined ? 0 : waitMs(r.url)));
  return replicas.map((r, i) => {
    const p = policies[i]!;
    if (p.predictedMarginMs === undefined) return saturation(r, p);
    let best = Infinity;
    replicas.forEach((o, j) => {
      if (j !== i && o.health === 'up' && waits[j]! < best) best = waits[j]!;
    });
    // Alone (or the others down): against an idle replica, as nothing is faster.
    const allowed = (best === Infinity ? 0 : best) + loadMs + p.predictedMarginMs;
    return waits[i]! / Math.max(allowed, 1);
  });
}
