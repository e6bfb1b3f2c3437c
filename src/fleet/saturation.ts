import type { ReplicaView } from './types';

export interface SaturationPolicy {
  /** Waiting requests per replica at which it counts as full. */
  targetWaitingPerReplica: number;
  /** KV-cache usage at which it counts as full (0..1). */
  kvCeiling: number;
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
