/**
 * The `load-backoff` filter (src/scheduler/filters/load-backoff.ts, one unit) and its place in the
 * default pipeline: a replica where the adapter's load backs off is not chosen for a load while
 * another candidate can take the request without one; when every candidate would need such a
 * load, those whose backoff ends soonest stay (the manager refuses there with that Retry-After).
 */
import { loadBackoff } from '../../src/scheduler/filters/load-backoff';
import {
  defaultPipeline,
  pipelineFor,
  SchedulingPipeline,
  defaultWeights,
} from '../../src/scheduler/pipeline';
import type { LoadBackoffView, SchedulingContext, SchedulingRequest } from '../../src/scheduler/types';
import { cands, ctx, urls, view } from './helpers';

const onDemand: SchedulingRequest = { kind: 'on-demand', adapter: { name: 'a', path: '/adapters/a' } };
const loaded = { state: 'loaded' as const, lastUsed: 0, inFlight: 0 };

/** Backoff ends of adapter `a` by replica URL, counting the per-replica lookups. */
function backoff(ends: Record<string, number>): LoadBackoffView & { lookups: number } {
  const b = {
    lookups: 0,
    anyHeld: (adapter: string, now: number) => adapter === 'a' && Object.values(ends).some((e) => e > now),
    heldUntil: (adapter: string, url: string) => {
      b.lookups++;
      return adapter === 'a' ? (ends[url] ?? 0) : 0;
    },
  };
  return b;
}

function withBackoff(
  ends: Record<string, number>,
  over = {},
): SchedulingContext & { b: ReturnType<typeof backoff> } {
  const b = backoff(ends);
  return { ...ctx(over), loadBackoff: b, b };
}

describe('load-backoff filter', () => {
  it('drops a replica whose load backs off while another can load', () => {
    const c = withBackoff({ x: 5000 });
    const fleet = cands([view('x'), view('y')], c);
    expect(urls(loadBackoff.filter(onDemand, fleet, c).kept)).toEqual(['y']);
  });

  it('keeps a holder backing off (no load there) and a saturated holder over a backed-off free slot', () => {
    const c = withBackoff({ h: 5000, x: 5000 });
    const fleet = cands([view('h', { adapter: loaded, waiting: 9 }), view('x')], c);
    expect(urls(loadBackoff.filter(onDemand, fleet, c).kept)).toEqual(['h']);
  });

  it('counts a holder only by placement (nobody loading yet) as a load there', () => {
    const c = withBackoff({ p: 5000, q: 5000 });
    const placed = { state: 'loading' as const, lastUsed: 0, inFlight: 0, placed: true };
    const claimed = { state: 'loading' as const, lastUsed: 0, inFlight: 0, claimed: true };
    const fleet = cands([view('p', { adapter: placed }), view('q', { adapter: claimed }), view('y')], c);
    expect(urls(loadBackoff.filter(onDemand, fleet, c).kept)).toEqual(['y']);
    // Another process loading it there: the request waits for that load, none of its own.
    const loading = { state: 'loading' as const, lastUsed: 0, inFlight: 0 };
    expect(urls(loadBackoff.filter(onDemand, cands([view('p', { adapter: loading })], c), c).kept)).toEqual([
      'p',
    ]);
  });

  it('every candidate backing off: keeps those whose backoff ends soonest', () => {
    const c = withBackoff({ x: 9000, y: 4000, z: 4000 });
    const fleet = cands([view('x'), view('y'), view('z')], c);
    expect(urls(loadBackoff.filter(onDemand, fleet, c).kept)).toEqual(['y', 'z']);
  });

  it('an ended backoff holds nothing off', () => {
    const c = withBackoff({ x: 1500, y: 9000 });
    const fleet = cands([view('x'), view('y')], c);
    expect(urls(loadBackoff.filter(onDemand, fleet, c).kept)).toEqual(['x']);
  });

  it('looks at no replica while nothing backs off for the adapter, nor for base or static requests', () => {
    const c = withBackoff({ x: 5000 });
    const fleet = cands([view('x'), view('y')], c);
    const other = { ...onDemand, adapter: { name: 'b', path: '/adapters/b' } };
    expect(loadBackoff.filter(other, fleet, c).kept).toBe(fleet);
    expect(loadBackoff.filter({ kind: 'base' }, fleet, c).kept).toBe(fleet);
    expect(loadBackoff.filter({ ...onDemand, kind: 'static' }, fleet, c).kept).toBe(fleet);
    expect(c.b.lookups).toBe(0);
    // Without a backoff in the context (the benchmark's decisions): nothing to drop.
    const bare = ctx();
    expect(loadBackoff.filter(onDemand, cands([view('x')], bare), bare).kept).toHaveLength(1);
  });
  it('keeps a replica whose backoff ended, exactly now or before, beside one that never failed', () => {
    // ctx's now is 1500.
    const c = withBackoff({ x: 1500, y: 1000, z: 9000 });
    const fleet = cands([view('w'), view('x'), view('y'), view('z')], c);
    expect(urls(loadBackoff.filter(onDemand, fleet, c).kept)).toEqual(['w', 'x', 'y']);
  });

  it('every candidate backing off: the soonest end wherever it is listed', () => {
    const c = withBackoff({ x: 4000, y: 9000, z: 6000 });
    const fleet = cands([view('x'), view('y'), view('z')], c);
    expect(urls(loadBackoff.filter(onDemand, fleet, c).kept)).toEqual(['x']);
  });

  it('counts a replica unloading the adapter as a load there', () => {
    const c = withBackoff({ u: 5000 });
    const unloading = { state: 'unloading' as const, lastUsed: 0, inFlight: 0 };
    const fleet = cands([view('u', { adapter: unloading }), view('y')], c);
    expect(urls(loadBackoff.filter(onDemand, fleet, c).kept)).toEqual(['y']);
  });

  it('asks nothing for an on-demand request that names no adapter', () => {
    // A view that would hold anything off, asked of any name: it is asked nothing.
    const asked: unknown[] = [];
    const held: LoadBackoffView = {
      anyHeld: (adapter) => (asked.push(adapter), true),
      heldUntil: (adapter) => (asked.push(adapter), 9000),
    };
    const c = { ...ctx(), loadBackoff: held };
    const fleet = cands([view('x'), view('y')], c);
    expect(loadBackoff.filter({ kind: 'on-demand' }, fleet, c).kept).toBe(fleet);
    expect(asked).toHaveLength(0);
  });
});

describe('the pipelines', () => {
  it('run it after health, before the affinity rule, in every configuration', () => {
    expect(defaultPipeline.filters.slice(0, 3)).toEqual(['eligibility', 'health', 'load-backoff']);
    for (const room_wait of ['escalate', 'replica', 'anywhere'] as const)
      for (const saturation_mode of ['count', 'predicted'] as const)
        expect(
          pipelineFor({ room_wait, saturation_mode, scorer_weights: defaultWeights(), picker: 'p2c' })
            .filters[2],
        ).toBe('load-backoff');
  });

  it('decides among the rest: the free slot not backing off over the one that is (count rule)', () => {
    const p = new SchedulingPipeline(
      pipelineFor({
        room_wait: 'escalate',
        saturation_mode: 'count',
        scorer_weights: defaultWeights(),
        picker: 'p2c',
      }),
    );
    // x has the free slot the rule prefers; y is full (its idle adapter would be unloaded).
    const full = { residentCount: 2 };
    for (let seed = 1; seed <= 20; seed++) {
      const c = { ...ctx({}, seed), loadBackoff: backoff({ x: 5000 }) };
      const d = p.schedule(onDemand, [view('x'), view('y', full)], c)!;
      expect([d.replica.url, d.stage]).toEqual(['y', 'any']);
    }
    const free = ctx();
    expect(p.schedule(onDemand, [view('x'), view('y', full)], free)!.replica.url).toBe('x');
  });
});
