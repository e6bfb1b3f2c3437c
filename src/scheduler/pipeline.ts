import { saturation } from '../fleet/saturation';
import type { ReplicaView } from '../fleet/types';
import { adapterAffinity } from './filters/adapter-affinity';
import { eligibility } from './filters/eligibility';
import { health } from './filters/health';
import { loadBackoff } from './filters/load-backoff';
import { nearBestTtft } from './filters/near-best-ttft';
import { predictedAffinity } from './filters/predicted-affinity';
import { poolPriority } from './filters/pool-priority';
import { room } from './filters/room';
import { maxScore } from './pickers/max-score';
import { powerOfTwo } from './pickers/p2c';
import { SCORERS, type ScorerWeights } from './scorers';
import type {
  Candidate,
  Decision,
  Filter,
  Picker,
  Scorer,
  ScorerShared,
  SchedulingContext,
  SchedulingRequest,
  Scored,
  Stage,
} from './types';

/** A scheduling profile as data: which units, in which order, with which weights. */
export interface PipelineConfig {
  filters: string[];
  scorers: { name: string; weight: number }[];
  picker: string;
}

/** What of a plugin configuration decides its pipeline. */
export interface PipelineSettings {
  room_wait: 'escalate' | 'replica' | 'anywhere';
  /** Absent: `count` (the seed's rule; the schema's default is `predicted`). */
  saturation_mode?: 'count' | 'predicted';
  scorer_weights: ScorerWeights;
  picker: string;
}

/** The one place a configuration becomes a pipeline profile. */
export function pipelineFor(config: PipelineSettings): PipelineConfig {
  const predicted = config.saturation_mode === 'predicted';
  return {
    // `room` only when waiting for room anywhere: it narrows the fallback to replicas that can
    // load now, which trades queueing behind holders for fewer refusals. Under predicted
    // saturation, the near-best TTFT filter leaves the scorers and picker to spread among equals.
    // `load-backoff` before the affinity rule: its steps choose among replicas that can serve.
    filters: [
      'eligibility',
      'health',
      'load-backoff',
      predicted ? 'predicted-affinity' : 'adapter-affinity',
      ...(config.room_wait === 'anywhere' ? ['room'] : []),
      ...(predicted ? ['near-best-ttft'] : []),
      'pool-priority',
    ],
    scorers: SCORERS.map((d) => ({ name: d.name, weight: config.scorer_weights[d.configKey] })),
    picker: config.picker,
  };
}

/** Each scorer's default weight, by config key. */
export function defaultWeights(): ScorerWeights {
  return Object.fromEntries(SCORERS.map((d) => [d.configKey, d.defaultWeight])) as ScorerWeights;
}

/** The pipeline of the default configuration (the schema's defaults). */
export const defaultPipeline: PipelineConfig = pipelineFor({
  room_wait: 'escalate',
  saturation_mode: 'predicted',
  scorer_weights: defaultWeights(),
  picker: 'p2c',
});

const FILTERS: Record<string, Filter> = {
  eligibility,
  health,
  'load-backoff': loadBackoff,
  'adapter-affinity': adapterAffinity,
  'predicted-affinity': predictedAffinity,
  room,
  'near-best-ttft': nearBestTtft,
  'pool-priority': poolPriority,
};
/** Factories: a stateful scorer (the prefix index) belongs to one pipeline, unless shared. */
const SCORER_FACTORIES: Record<string, (shared?: ScorerShared) => Scorer> = Object.fromEntries(
  SCORERS.map((d) => [d.name, d.create]),
);
const PICKERS: Record<string, Picker> = { p2c: powerOfTwo, 'max-score': maxScore };

/** filters -> weighted scorers -> picker, over a snapshot of the fleet; pure but for the prefix index. */
export class SchedulingPipeline {
  private readonly filters: Filter[];
  private readonly scorers: { scorer: Scorer; weight: number }[];
  private readonly picker: Picker;
  private readonly weightTotal: number;

  constructor(config: PipelineConfig = defaultPipeline, shared?: ScorerShared) {
    this.filters = config.filters.map((n) => lookup(FILTERS, n, 'filter'));
    this.scorers = config.scorers
      .filter((s) => s.weight > 0)
      .map((s) => ({ scorer: lookup(SCORER_FACTORIES, s.name, 'scorer')(shared), weight: s.weight }));
    this.picker = lookup(PICKERS, config.picker, 'picker');
    this.weightTotal = this.scorers.reduce((n, s) => n + s.weight, 0);
  }

  /** The decision, or null when no replica can serve the request at all. */
  schedule(req: SchedulingRequest, views: readonly ReplicaView[], ctx: SchedulingContext): Decision | null {
    // Indexed loops: a for-of's iterator results are allocated wherever the optimiser does not
    // remove them, and this runs per replica per request (bench/profile-decision.ts counts bytes).
    // The views completed in place are the candidates: no second array of them per request.
    // Nothing in the pipeline changes an array it is given (filters return a new one or it).
    for (let i = 0; i < views.length; i++) toCandidate(views[i]!, ctx);
    let candidates = views as Candidate[];
    const trail: Decision['filters'] = [];
    let stage: Stage = req.kind === 'on-demand' ? 'any' : req.kind;
    for (let k = 0; k < this.filters.length; k++) {
      const f = this.filters[k]!;
      const r = f.filter(req, candidates, ctx);
      candidates = r.kept;
      if (r.stage) stage = r.stage;
      trail.push({ name: f.name, kept: candidates.length });
      if (candidates.length === 0) return null;
    }
    const scored = this.weigh(req, candidates, ctx);
    const chosen = this.picker.pick(scored, ctx).candidate;
    for (let k = 0; k < this.scorers.length; k++) this.scorers[k]!.scorer.observe?.(req, chosen, ctx);
    return new ScoredDecision(chosen, stage, scored, trail);
  }

  /**
   * Each candidate with its weighted score: the sums in a reused typed array, each candidate's
   * object made once with its final score (the same additions, in the same order, as on the
   * object's own field before, which cost a number written per scorer per candidate).
   */
  private weigh(req: SchedulingRequest, candidates: Candidate[], ctx: SchedulingContext): Scored[] {
    const n = candidates.length;
    if (this.weightTotal <= 0 || n <= 1) return candidates.map((candidate) => ({ candidate, score: 0 }));
    if (totals.length < n) totals = new Float64Array(n);
    totals.fill(0, 0, n);
    for (let k = 0; k < this.scorers.length; k++) {
      const { scorer, weight } = this.scorers[k]!;
      const s = scorer.score(req, candidates, ctx);
      for (let i = 0; i < n; i++) totals[i] = totals[i]! + weight * clamp01(s[i] ?? 0);
    }
    return candidates.map((candidate, i) => ({ candidate, score: totals[i]! / this.weightTotal }));
  }
}

/** Per candidate, the weighted sum of its scores so far: one array for every decision (schedule is synchronous). */
let totals = new Float64Array(64);

/** A decision whose scores by URL are built only when read (never on the request path). */
class ScoredDecision implements Decision {
  constructor(
    readonly replica: Candidate,
    readonly stage: Stage,
    private readonly scored: readonly { candidate: Candidate; score: number }[],
    readonly filters: Decision['filters'],
  ) {}

  get scores(): Record<string, number> {
    const scores: Record<string, number> = {};
    for (const s of this.scored) scores[s.candidate.url] = s.score;
    return scores;
  }
}

/** A holder: the adapter is resident on the replica and not being unloaded. */
export function isHolder(v: ReplicaView): boolean {
  return v.adapter !== undefined && v.adapter.state !== 'unloading';
}

/** Completes a view into a candidate, in place: views are per-request copies, and this runs per replica per request. */
export function toCandidate(v: ReplicaView, ctx: SchedulingContext): Candidate {
  const c = v as Candidate;
  c.saturation = saturation(v, ctx.policy.saturation);
  c.stale = v.snapshotAt === null || ctx.now - v.snapshotAt > ctx.policy.staleAfterMs;
  c.holder = isHolder(v);
  c.ttftMs = 0;
  c.loadMs = 0;
  c.fixedMs = 0;
  c.ownMs = 0;
  ctx.predict?.(c, ctx);
  return c;
}

function clamp01(x: number): number {
  return x > 1 ? 1 : x > 0 ? x : 0;
}

function lookup<T>(table: Record<string, T>, name: string, what: string): T {
  const unit = table[name];
  if (unit === undefined)
    throw new Error(`unknown ${what} "${name}" (known: ${Object.keys(table).join(', ')})`);
  return unit;
}
