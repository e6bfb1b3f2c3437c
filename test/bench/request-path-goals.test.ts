import { requestPathGoals, type BenchResults } from '../../bench/goals';

/** The overhead part's results with only what the request-path goals read. */
const overhead = (o: Partial<NonNullable<BenchResults['overhead']>>): BenchResults['overhead'] => ({
  rows: [],
  memory: { mb: 50, perEntryBytes: 80, usPerDecision: 40 },
  heap: [{ decisions: 10_000, heapMb: 35, usPerDecision: 18 }],
  ...o,
});

describe('the request path goals (bench/goals.ts requestPathGoals)', () => {
  const cpuRow = (o: BenchResults['overhead']) =>
    requestPathGoals(o).find((g) => g.name.includes('plugin-server CPU'))!;

  it("judges the plugin server's counted CPU: lora-router's over the no-op's, at most 20 µs", () => {
    expect(cpuRow(overhead({ pluginServerCpu: { routerUs: 470, noopUs: 455, pairs: 4000 } }))).toMatchObject({
      met: true,
      result: '470 µs vs 455 µs: 15 µs added',
    });
    expect(cpuRow(overhead({ pluginServerCpu: { routerUs: 582, noopUs: 454, pairs: 4000 } }))).toMatchObject({
      met: false,
      result: '582 µs vs 454 µs: 128 µs added',
    });
  });

  it('says "not measured" for results from before the figure existed', () => {
    expect(cpuRow(overhead({}))).toMatchObject({ met: undefined, result: 'not measured' });
  });

  it('shows route + release cold beside the judged back-to-back figure, without judging it', () => {
    const row = requestPathGoals(
      overhead({ routeReleaseCold: { hotUs: 19.5, coldUs: 180, gapMs: 1, calls: 1000 } }),
    ).find((g) => g.name === 'route + release in process')!;
    expect(row.met).toBe(true);
    expect(row.result).toBe('18.0 µs (CPU alone: 19.5 µs back to back, 180 µs each after a 1 ms sleep)');
  });
});
