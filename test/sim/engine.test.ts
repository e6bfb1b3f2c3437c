import { VirtualClock } from '../../src/clock';
import { ReplicaEngine, type RequestRecord } from '../../sim/engine/engine';

function engine(opts: ConstructorParameters<typeof ReplicaEngine>[1] = {}) {
  const clock = new VirtualClock();
  const e = new ReplicaEngine(clock, {
    decodeMsPerStep: 10,
    decodeSlowdownPerSeq: 0,
    prefillMsPerToken: 0,
    loadBaseMs: 500,
    loadMsPerRank: 0,
    ...opts,
  });
  const done: RequestRecord[] = [];
  e.onRecord((r) => done.push(r));
  return { clock, e, done };
}

describe('ReplicaEngine', () => {
  it('generates one token per step and records arrival, start, first token and end', async () => {
    const { clock, e, done } = engine();
    e.preload('a', 8);
    e.submit({ id: 'r1', adapter: 'a', promptTokens: 10, maxTokens: 3 });
    await clock.run();
    expect(done).toEqual([
      {
        id: 'r1',
        adapter: 'a',
        promptTokens: 10,
        outputTokens: 3,
        arrival: 0,
        start: 0,
        firstToken: 10,
        end: 30,
      },
    ]);
  });

  it('keeps a request waiting when its adapter would exceed max_loras, and lets later ones pass', async () => {
    const { clock, e, done } = engine({ maxLoras: 2, maxNumSeqs: 8 });
    for (const a of ['a', 'b', 'c']) e.preload(a, 8);
    e.submit({ id: 'a1', adapter: 'a', promptTokens: 1, maxTokens: 5 });
    e.submit({ id: 'b1', adapter: 'b', promptTokens: 1, maxTokens: 5 });
    e.submit({ id: 'c1', adapter: 'c', promptTokens: 1, maxTokens: 1 });
    e.submit({ id: 'a2', adapter: 'a', promptTokens: 1, maxTokens: 1 });
    e.submit({ id: 'base', adapter: null, promptTokens: 1, maxTokens: 1 });
    await clock.run(0);
    // Slots are free (8), yet c1 waits: two adapters already fill the batch. a2 and base pass it.
    expect(e.stats()).toMatchObject({
      running: 4,
      waiting: 1,
      runningAdapters: ['a', 'b'],
      waitingAdapters: ['c'],
    });
    await clock.run();
    const byId = Object.fromEntries(done.map((r) => [r.id, r]));
    expect(byId.a2!.start).toBe(0);
    expect(byId.base!.start).toBe(0);
    expect(byId.c1!.start).toBe(50); // only after a1 and b1 finished
  });

  it('reloads an adapter pushed out of the host cache, costing a load inside the engine loop', async () => {
    const { clock, e, done } = engine({ maxCpuLoras: 2, maxLoras: 1 });
    e.preload('a', 8);
    e.preload('b', 8);
    e.preload('c', 8); // evicts a (least recently used)
    expect(e.stats().cachedAdapters).toEqual(['b', 'c']);
    e.submit({ id: 'hit', adapter: 'c', promptTokens: 1, maxTokens: 1 });
    await clock.run();
    e.submit({ id: 'miss', adapter: 'a', promptTokens: 1, maxTokens: 1 });
    await clock.run();
    const [hit, miss] = done;
    expect(hit!.firstToken! - hit!.arrival).toBe(10);
    expect(miss!.firstToken! - miss!.arrival).toBe(510); // 500 ms reload + one step
    expect(e.stats().cacheMissLoads).toBe(1);
    expect(e.stats().cachedAdapters).toEqual(['c', 'a']);
  });

  it('pauses engine steps while adapter weights load, and serialises loads', async () => {
    const { clock, e, done } = engine();
    e.submit({ id: 'r', adapter: null, promptTokens: 1, maxTokens: 3 });
    await clock.run(0);
    const loaded: number[] = [];
    void e.loadWeights('x', 8).then(() => loaded.push(clock.now()));
    void e.loadWeights('y', 8).then(() => loaded.push(clock.now()));
    await clock.run();
    expect(loaded).toEqual([500, 1000]);
    // Tokens at 10, then steps blocked until both loads are done: 1010, 1020.
    expect(done[0]!.end).toBe(1020);
  });

  it('reports KV usage from tokens held and does not admit past capacity', async () => {
    const { clock, e } = engine({ kvCapacityTokens: 100, maxNumSeqs: 8 });
    e.submit({ id: 'r1', adapter: null, promptTokens: 40, maxTokens: 10 });
    e.submit({ id: 'r2', adapter: null, promptTokens: 40, maxTokens: 10 });
    await clock.run(0);
    expect(e.stats()).toMatchObject({ running: 2, waiting: 0, kvUsage: 0.8 });
    e.submit({ id: 'r3', adapter: null, promptTokens: 40, maxTokens: 10 });
    await clock.run(15);
    expect(e.stats()).toMatchObject({ running: 2, waiting: 1 });
    expect(e.stats().kvUsage).toBeCloseTo(0.82);
    expect(() => e.submit({ id: 'huge', adapter: null, promptTokens: 95, maxTokens: 10 })).toThrow(
      /KV capacity/,
    );
    await clock.run();
    expect(e.stats()).toMatchObject({ running: 0, waiting: 0, kvUsage: 0 });
  });

  it('aborts waiting and running requests and frees their KV', async () => {
    const { clock, e, done } = engine({ maxNumSeqs: 1 });
    e.submit({ id: 'run', adapter: null, promptTokens: 5, maxTokens: 100 });
    e.submit({ id: 'wait', adapter: null, promptTokens: 5, maxTokens: 1 });
    await clock.run(0);
    expect(e.abort('wait')).toBe(true);
    expect(e.abort('run')).toBe(true);
    expect(e.abort('run')).toBe(false);
    await clock.run();
    expect(done.map((r) => [r.id, r.aborted])).toEqual([
      ['wait', true],
      ['run', true],
    ]);
    expect(e.stats().kvUsage).toBe(0);
  });

  it('slows decode steps as the batch grows', async () => {
    const { clock, e, done } = engine({ decodeSlowdownPerSeq: 0.5, maxNumSeqs: 4 });
    for (let i = 0; i < 3; i++) e.submit({ id: `r${i}`, adapter: null, promptTokens: 1, maxTokens: 1 });
    await clock.run();
    expect(done[0]!.end).toBe(20); // 10 ms * (1 + 0.5 * 2)
  });
});
