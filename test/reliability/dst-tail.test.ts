/**
 * The world's run gives the requests that come after its span, as those within it, the whole tail
 * (70 s) to be answered before "every request answered" judges them (seed 2401991: a shape's
 * requests came after the span, the run stopped before them and judged them 3 s later). A route
 * planted never to end is still caught, after that tail.
 */
import { runSchedule } from '../../dst/run';
import type { Schedule } from '../../dst/schedule';
import { TAIL_MS } from '../../dst/world-timings';
import { RouterService } from '../../src/router/router';

const WORLD: Schedule['world'] = {
  nodes: 3,
  replicas: 2,
  maxLoadedAdapters: 2,
  adapters: ['sql', 'chat', 'team,a', 'team'],
  loadMs: 800,
  decodeMsPerStep: 50,
  coldLoadsPerMinute: 1000,
  leaseMaxAgeMs: 4000,
  ttftSloMs: 0,
  spanMs: 2000,
  queueTimeoutMs: 4000,
  upstreamTimeoutMs: 5000,
};

afterEach(() => jest.restoreAllMocks());

it('a request on `team` that comes after the span and never ends is judged unanswered after the whole tail', async () => {
  const route = RouterService.prototype.route;
  // Planted: the route of any request on `team` never settles (its decision hangs).
  jest.spyOn(RouterService.prototype, 'route').mockImplementation(function (this: RouterService, req) {
    const team = typeof req.body === 'string' && req.body.includes('"model":"team"');
    return team ? new Promise(() => {}) : route.call(this, req);
  });
  const r = await runSchedule({
    seed: 7,
    world: WORLD,
    actions: [
      { at: 100, kind: 'request', node: 0, adapter: 1, tokens: 2, prompt: 100 },
      { at: 2500, kind: 'request', node: 1, adapter: 3, tokens: 2, prompt: 100 },
    ],
  });
  expect(r.violation?.invariant).toBe('every request answered');
  expect(r.violation!.at).toBeGreaterThanOrEqual(2500 + TAIL_MS);
}, 60_000);
