/**
 * Issue 34's goals in one list, each with its verdict over the points it applies to and a link to
 * its table per point, where every miss says why: the list heads bench/results/README.md and
 * docs/benchmarks.md's summary. The verdicts per point are computed beside each part's report
 * (bench/des/slo-goals-25.ts, peers-report.ts, bench/goals.ts `classGoal`, `requestPathGoals`);
 * this module only gathers them (it cannot live in goals.ts, which those modules import).
 */
import { classGoal, requestPathGoals, type BenchResults } from './goals';
import { POOLED } from './des/bounds';
import { peerGoals } from './des/peers-report';
import { classGroups } from './des/slo-classes';
import { goals25, groups } from './des/slo-goals-25';
import { ms, table } from './report';
import type { SloPoint } from './des/slo-sweep';

export interface GoalVerdict {
  goal: string;
  /** Where the goal applies. */
  applies: string;
  /** Points met of those the goal applies to; undefined when not measured. */
  met?: number;
  of?: number;
  /** The points missed, named. */
  missed: string[];
  /** A figure instead of a count (the request path). */
  result?: string;
  /** Where the goal's table per point is, from the repository's root. */
  link?: string;
}

const RESULTS = 'bench/results/README.md';

/** Counts the points `f` gives a goal for, and names the missed ones. */
function over<G>(gs: G[], name: (g: G) => string, f: (g: G) => { met: boolean } | undefined) {
  const apply = gs.map((g) => ({ name: name(g), x: f(g) })).filter((y) => y.x !== undefined);
  const missed = apply.filter((y) => !y.x!.met).map((y) => y.name);
  return { met: apply.length - missed.length, of: apply.length, missed };
}

/** Every goal of issue 34 with its verdict, from results.json (a part that did not run: not measured). */
export function goalList(r: BenchResults): GoalVerdict[] {
  const x = r.slo;
  const router = x?.variants[0];
  const sloGroups = x ? groups(x.points) : [];
  const bounded = x?.points[0]!.results.some((p) => p.policy === POOLED) ?? false;
  const point = (g: { workload: string; loadMs: number; load: number }[]) =>
    `${g[0]!.workload} ${ms(g[0]!.loadMs)} ${Math.round(g[0]!.load * 100)}%`;
  const slo = (f: (g: SloPoint[]) => { met: boolean } | undefined, anchor: string, when = true) =>
    x && when ? { ...over(sloGroups, point, f), link: `${RESULTS}#${anchor}` } : { missed: [] };
  const issue25 = 'issue-25-goals-long-prompts-kv-bound-traffic';
  const issue34 = 'issue-34-the-peers-as-they-run-and-the-bounds';
  const c = r.classes;
  const classes = (f: (g: ReturnType<typeof classGoal>) => { met: boolean } | undefined) =>
    c
      ? {
          ...over(
            classGroups(c.points),
            (g) => `${ms(g[0]!.loadMs)} ${Math.round(g[0]!.load * 100)}%`,
            (g) => f(classGoal(g)),
          ),
          link: `${RESULTS}#slo-classes-interactive-and-batch-on-one-fleet`,
        }
      : { missed: [] };
  return [
    {
      goal: "SLO attainment ≥ every baseline's, the peers' best included (≥ 0.9× at 3 s loads)",
      applies: 'every point',
      ...slo((g) => goals25(g, router!).slo, issue25),
    },
    {
      goal: 'SLO attainment ≥ 0.9× the pooled bound',
      applies: 'below capacity, loads ≤ 0.3 s',
      ...slo((g) => peerGoals(g, router!).vsPooled, issue34, bounded),
    },
    {
      goal: 'two classes: interactive ≥ 99% within 2 s',
      applies: 'up to 70% load, loads ≤ 1 s',
      ...classes((g) => g.interactive),
    },
    {
      goal: 'two classes: batch never starved (≥ 99% within 30 s)',
      applies: 'below capacity',
      ...classes((g) => g.batch),
    },
    {
      goal: "load/unload operations per served request ≤ Dynamo's min-cost-flow controller's at equal or better SLO",
      applies: 'every point',
      ...slo((g) => peerGoals(g, router!).churn, issue34, bounded),
    },
    {
      goal: "TTFT p99 (a refusal never answered) no worse than the best baseline's",
      applies: 'below capacity',
      ...slo((g) => peerGoals(g, router!).p99, issue34, bounded),
    },
    ...requestPathGoals(r.overhead).map(
      (g): GoalVerdict => ({
        goal: `request path: ${g.name}: ${g.goal}`,
        applies: 'the overhead part, on a quiet machine',
        ...(g.met === undefined ? {} : { met: g.met ? 1 : 0, of: 1 }),
        missed: [],
        result: g.result,
        ...(r.overhead ? { link: `${RESULTS}#request-path-overhead` } : {}),
      }),
    ),
  ];
}

/** The list as a table: goal, where it applies, verdict, the points missed (the first few). */
export function goalListTable(r: BenchResults): string {
  const FEW = 4;
  const verdict = (g: GoalVerdict) => {
    if (g.of === undefined) return 'not measured';
    if (g.result !== undefined) return `${g.met === g.of ? '**met**' : '**missed**'}: ${g.result}`;
    return g.met === g.of
      ? `**met** at all ${g.of} points`
      : `**missed** at ${g.of - g.met!} of ${g.of} points`;
  };
  const missed = (g: GoalVerdict) =>
    g.missed.length
      ? `${g.missed.slice(0, FEW).join('; ')}${g.missed.length > FEW ? `; and ${g.missed.length - FEW} more` : ''}`
      : '';
  return table(
    ['goal', 'applies', 'verdict', 'missed at'],
    goalList(r).map((g) => [g.link ? `[${g.goal}](${g.link})` : g.goal, g.applies, verdict(g), missed(g)]),
  );
}

/** bench/results/README.md's goal list (its links from the results folder). */
export function goalListSection(r: BenchResults): string[] {
  return [
    "## Issue 34's goals",
    '',
    'Each goal of issue 34 with its verdict over the points it applies to (a point: workload, adapter load time and fleet load, means over its seeds; SLO attainment at 5 s with a refusal as a miss); the linked table gives every point and why a missed one is missed. A goal whose part has not run says "not measured".',
    '',
    goalListTable(r).replace(/\]\(bench\/results\/README\.md#/g, '](#'),
    '',
  ];
}
