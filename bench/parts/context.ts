import type { Arrival } from '../../sim/workload/workload';
import * as P from '../des/policies';
import type { Scenario } from '../des/run';
import { BASELINE_POLICIES, type BenchResults } from '../goals';

/** What every benchmark part reads: the options and the workload, parsed once by bench/cli.ts. */
export interface BenchContext {
  full: boolean;
  seeds: number[];
  scenario: Scenario;
  mainLoad: number;
  capacity: number;
  workload: Arrival[];
  workloadNote: string;
  /** A workload by name (conversation, bursty), as many requests as the run takes. */
  named: (name: string) => { arrivals: Arrival[]; note: string };
  /** The repository (dist/plugins is under it). */
  root: string;
  log: (s: string) => void;
  /** Results directory (charts go there). */
  out: string;
  /** Raw options a part reads itself. */
  v: {
    alphas?: string;
    workloads?: string;
    requests?: string;
    variants?: string;
    load?: string;
    'time-scale'?: string;
    'class-loads'?: string;
    'class-load-ms'?: string;
    'batch-share'?: string;
  };
  /** results.json, filled in by each part. */
  json: BenchResults;
  /** bench/results/README.md, one section per part. */
  md: string[];
}

/** One part of `npm run bench` (`--only NAME`): it runs, records its results and renders its section. */
export interface BenchPart {
  name: string;
  run(c: BenchContext): Promise<void>;
  /**
   * For a part whose section renders from its results alone: its key in results.json, its
   * section and the files it draws, so that `--merge FILE` can take it from another run's
   * results.json (bench/merge.ts).
   */
  fromResults?: {
    key: keyof BenchResults;
    section(r: BenchResults): string[];
    files?(r: BenchResults): { file: string; text: string }[];
  };
}

export const POLICIES = [P.loraRouter(), ...BASELINE_POLICIES, P.oracle];

/** lora-router configurations A/B'd against each other (issue 9): eviction and placement units. */
export const VARIANTS: { name: string; config: Record<string, unknown>; quick: boolean }[] = [
  { name: 'lru, escalate (default)', config: {}, quick: true },
  {
    name: 'lru, wait on the chosen replica',
    config: { room_wait: 'replica', queue_timeout_ms: 10000 },
    quick: true,
  },
  {
    name: 'lru, wait for room anywhere',
    config: { room_wait: 'anywhere', queue_timeout_ms: 10000 },
    quick: true,
  },
  {
    name: 'lru + victim placement',
    config: { eviction: 'lru', scorer_weights: { victim: 3 } },
    quick: false,
  },
  { name: 'value', config: { eviction: 'value' }, quick: true },
  {
    name: 'value + victim placement',
    config: { eviction: 'value', scorer_weights: { victim: 3 } },
    quick: true,
  },
  {
    name: 'value + victim + consolidate',
    config: { eviction: 'value', scorer_weights: { victim: 3, consolidate: 2 } },
    quick: false,
  },
];

/** How refusals are counted, said once beside every table that has them. */
export const ACCOUNTING =
  'Loads, hit rate and the Belady ratios count served requests only (a refused request never loads), for every policy alike; "refused" stands beside them. "TTFT p50/p99" count a refused request as never answered; "served p99" leaves refusals out.';
