/**
 * Health from the runtime polling now (src/router/polled-health.ts), alone: a decision on a
 * runtime replaced by a record change takes each replica's health from its successor's polls
 * when those are at least as recent as its own, and nothing else.
 */
import type { ReplicaView } from '../../src/fleet/types';
import type { FleetRuntime } from '../../src/runtime';
import { withPolledHealth } from '../../src/router/polled-health';

const view = (url: string, health: ReplicaView['health'], checkedAt: number | null): ReplicaView => ({
  url,
  backend: 'vllm',
  priority: 0,
  health,
  snapshotAt: checkedAt,
  checkedAt,
  waiting: 0,
  running: 0,
  inFlight: 0,
  residentCount: 0,
});

function runtimes(polled: ReplicaView[]) {
  const reads: unknown[][] = [];
  const successor = {
    store: {
      views: async (...args: unknown[]) => (reads.push(args), polled.map((v) => ({ ...v }))),
    },
  };
  const old = { current: () => successor } as unknown as FleetRuntime;
  const same = { current: () => same, store: successor.store } as unknown as FleetRuntime;
  return { old, same, reads };
}

describe('withPolledHealth', () => {
  it('takes the successor’s health where it polled at least as recently, keeps the rest', async () => {
    const { old, reads } = runtimes([
      view('http://newer', 'down', 20),
      view('http://equal', 'down', 10),
      view('http://older', 'down', 5),
      view('http://never', 'down', null),
      view('http://unseen-here', 'down', 1),
    ]);
    const views = [
      view('http://newer', 'up', 10),
      view('http://equal', 'up', 10),
      view('http://older', 'up', 10),
      view('http://never', 'up', 10),
      view('http://unseen-here', 'up', null),
      view('http://not-there', 'up', 10),
    ];
    const out = await withPolledHealth(old, views);
    expect(out).toBe(views);
    expect(out.map((v) => [v.url.slice(7), v.health])).toEqual([
      ['newer', 'down'],
      ['equal', 'down'],
      ['older', 'up'],
      ['never', 'up'],
      ['unseen-here', 'down'],
      ['not-there', 'up'],
    ]);
    expect(reads).toEqual([[views.map((v) => v.url), undefined, false]]);
  });

  it('asks nothing of a current runtime, or for no views', async () => {
    const { old, same, reads } = runtimes([view('http://a', 'down', 99)]);
    const views = [view('http://a', 'up', 1)];
    expect(await withPolledHealth(same, views)).toBe(views);
    expect(views[0]!.health).toBe('up');
    expect(await withPolledHealth(old, [])).toEqual([]);
    expect(reads).toEqual([]);
  });
});
