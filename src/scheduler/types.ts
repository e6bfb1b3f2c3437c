import type { SaturationPolicy } from '../fleet/saturation';
import type { AdapterRef, ReplicaView, ResidentAdapter } from '../fleet/types';
import type { Random } from '../random';
import type { PrefixIndex } from './prefix-index';

/**
 * base: the base model (no adapter). static: an adapter registered at replica start (only its
 * holders can serve it). on-demand: an adapter the router may load where it is missing.
 */
export type RequestKind = 'base' | 'static' | 'on-demand';

export interface SchedulingRequest {
  kind: RequestKind;
  adapter?: AdapterRef;
  /** Leading prompt text, for the prefix-affinity scorer. */
  prompt?: string;
  /** Estimated prompt + max tokens: replicas whose known context is shorter cannot serve it. */
  contextTokens?: number;
}

/** `predicted`: holders keep an adapter while their predicted TTFT beats loading it elsewhere. */
export type SaturationMode = 'count' | 'predicted';

/** A replica under consideration, with what every unit needs precomputed once. */
export interface Candidate extends ReplicaView {
  saturation: number;
  /** No successful poll within `staleAfterMs`: load figures unknown, not idle. */
  stale: boolean;
  /** Holds the adapter (static, loaded or loading): no load needed. */
  holder: boolean;
  /** Predicted time to first token there, ms (`saturation_mode: predicted`; else 0). */
  ttftMs: number;
  /** Of `ttftMs`, the adapter load (and unload to make room) it would wait for there. */
  loadMs: number;
  /** Of `loadMs`, what no wait in the gateway shortens (src/work/predict.ts `fixedMs`). */
  fixedMs: number;
  /** Of `ttftMs`, the request's own prefill there. */
  ownMs: number;
  /** Of the prompt, the leading tokens the prefix index says this replica served last. */
  prefixTokens?: number;
  /** Of those, the ones the prediction credited as cached (no prefill; src/work/predict.ts `prefixCredit`). */
  cachedTokens?: number;
  /**
   * With `slo_classes`, on a replica its load would go to: what that load adds to the TTFT of the
   * requests of higher classes waiting there for their first token (the load, once each: it
   * stops the engine under all of them). src/router/prediction.ts; held for in room-wait.ts.
   */
  stallsMs?: number;
}

export interface SchedulingPolicy {
  saturation: SaturationPolicy;
  /** Non-static adapters a vLLM replica may hold; 0 = the router never loads. */
  maxLoadedAdapters: number;
  staleAfterMs: number;
  saturationMode?: SaturationMode;
  /** A holder keeps the adapter while its predicted TTFT is within this of the best non-holder's. */
  saturationMarginMs?: number;
  /** Candidates within this of the best predicted TTFT are near-equal (the picker spreads among them). */
  ttftToleranceMs?: number;
}

export interface SchedulingContext {
  now: number;
  policy: SchedulingPolicy;
  random: Random;
  /**
   * Cost of evicting a resident adapter (lower = cheaper), comparable across replicas; with
   * `isStatic`, what placement units need to weigh victims. Absent: least recently used.
   */
  victimCost?: (victim: ResidentAdapter) => number;
  isStatic?: (name: string) => boolean;
  /** A replica's context length (vLLM `max_model_len`), when it reported one. */
  contextOf?: (url: string) => number | undefined;
  /**
   * Sets a candidate's `ttftMs`, `loadMs`, `fixedMs` and `ownMs`, under `saturation_mode: predicted`;
   * given the context it is called with (one function for every request: src/router/prediction.ts).
   */
  predict?: (c: Candidate, ctx: SchedulingContext) => void;
  /** Failed loads this process holds off (src/adapters/backoff.ts), for the `load-backoff` filter. */
  loadBackoff?: LoadBackoffView;
}

/** What the `load-backoff` filter reads of the loads held off after failing (src/adapters/backoff.ts). */
export interface LoadBackoffView {
  /** Whether a load of `adapter` may be held off on some replica at `now` (false: nothing to look at). */
  anyHeld(adapter: string, now: number): boolean;
  /** Until when (on the clock) a load of `adapter` on `url` is held off and routed around; 0: it is not. */
  heldUntil(adapter: string, url: string): number;
}

/** Which stage of the adapter-affinity rule decided, or why it was skipped. */
export type Stage = 'holder' | 'free' | 'any' | 'base' | 'static';

export interface FilterResult {
  kept: Candidate[];
  stage?: Stage;
}

/** Returns a subset of the candidates, without side effects (llm-d's Filter). */
export interface Filter {
  readonly name: string;
  filter(req: SchedulingRequest, candidates: Candidate[], ctx: SchedulingContext): FilterResult;
}

/** Scores each candidate in [0, 1] (clamped by the pipeline, so weights compose predictably). */
export interface Scorer {
  readonly name: string;
  score(req: SchedulingRequest, candidates: Candidate[], ctx: SchedulingContext): number[];
  /** Learns from the decision (prefix index); optional. */
  observe?(req: SchedulingRequest, chosen: Candidate, ctx: SchedulingContext): void;
}

/**
 * One scorer as data: the pipeline's table of units, the schema's `scorer_weights` fields and the
 * docs tables are all built from the list of these (`src/scheduler/scorers/index.ts`), as llm-d
 * builds its scheduler plugins from registered factories.
 */
export interface ScorerDescriptor<K extends string = string> {
  /** The unit's name in a pipeline profile (`kv-cache`). */
  readonly name: string;
  /** Its weight's field under `scorer_weights` (`kv_cache`). */
  readonly configKey: K;
  readonly defaultWeight: number;
  /** `affinity` pulls toward the same replica again, `distribution` spreads load. */
  readonly tendency: 'affinity' | 'distribution';
  /** What scores higher: the docs table's row and the schema field's description. */
  readonly scoresHigher: string;
  /** The candidate fields and context it reads. */
  readonly reads: string;
  /** Not a default: its description says so. */
  readonly experimental?: boolean;
  /** A fresh unit: a stateful scorer's state (the prefix index) is the pipeline's, or `shared`. */
  create(shared?: ScorerShared): Scorer;
}

/** State a router's pipelines share with each other and with its TTFT prediction. */
export interface ScorerShared {
  prefixIndex?: PrefixIndex;
}

/** Keeps the literal `configKey`, so the typed config's `scorer_weights` follows the list. */
export function defineScorer<const K extends string>(d: ScorerDescriptor<K>): ScorerDescriptor<K> {
  return d;
}

export interface Scored {
  candidate: Candidate;
  score: number;
}

/** Turns scored candidates (never empty) into the choice. */
export interface Picker {
  readonly name: string;
  pick(scored: Scored[], ctx: SchedulingContext): Scored;
}

export interface Decision {
  replica: Candidate;
  stage: Stage;
  /** Weighted score of each scored candidate, by URL. */
  scores: Record<string, number>;
  /** Candidates left after each filter, in order. */
  filters: { name: string; kept: number }[];
}
