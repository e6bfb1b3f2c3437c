import { consolidateDescriptor } from './consolidate';
import { inFlightDescriptor } from './in-flight';
import { kvCacheDescriptor } from './kv-cache';
import { prefixDescriptor } from './prefix';
import { queueDescriptor } from './queue';
import { victimDescriptor } from './victim';

/**
 * Every scorer, in pipeline order. Adding one is its file plus an entry here: the pipeline's
 * table, the `scorer_weights` schema and typed config, and the docs tables follow this list.
 */
export const SCORERS = [
  queueDescriptor,
  kvCacheDescriptor,
  inFlightDescriptor,
  prefixDescriptor,
  victimDescriptor,
  consolidateDescriptor,
] as const;

/** `scorer_weights` in the typed config: one number per scorer. */
export type ScorerWeights = Record<(typeof SCORERS)[number]['configKey'], number>;
