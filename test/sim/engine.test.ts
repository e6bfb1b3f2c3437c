import { VirtualClock, type Clock } from '../../src/clock';
import { ReplicaEngine, type RequestRecord } from '../../sim/engine/engine';
import {
  adapterBytes,
  bandwidthFor,
  defaultLoadCost,
  loadMs,
  loraParams,
  LLAMA_3_1_8B,
} from '../../sim/engine/load-cost';

function engine(opts: ConstructorParameters<typeof ReplicaEngine>[1] = {}) {
  const clock = new VirtualClock();
  const e = new ReplicaEngine(clock, {
    decodeMsPerStep: 10,
    decodeSlowdownPerSeq: 0,
    prefillMsPerToken: 0,
    loadBaseMs: 500,
    loadReadMBps: Infinity,
    ...opts,
  });
  const done: RequestRecord[] = [];
  e.onRecord((r) => done.push(r));
  return { clock, e, done };
}

describe('ReplicaEngine', () => {
  it("sums the finished requests' prompt tokens and time from scheduled to first token (vLLM's prefill histograms)", async () => {
    // Prefill 0.1 ms a token, decode 10 ms a step; KV for one at a time, so the second waits.
    const { clock, e } = engine({ prefillMsPerToken: 0.1, kvCapacityTokens: 1500 });
    e.submit({ id: 'r1', adapter: null, promptTokens: 1000, maxTokens: 5 });
    e.submit({ id: 'r2', adapter: null, promptTokens: 500, maxTokens: 5 });
    expect(e.stats()).toMatchObject({ finishedPromptTokens: 0, prefillSeconds: 0 });
    await clock.run();
    // r1: a 100 + 10 ms step; r2, scheduled once r1 ends: 50 + 10 ms. Its wait is queue time, not prefill.
    expect(e.stats().finishedPromptTokens).toBe(1500);
    expect(e.stats().prefillSeconds).toBeCloseTo(0.11 + 0.06, 6);
  });

  it("sums the finished requests' generated tokens and time from first to last token (vLLM's decode histograms)", async () => {
    // Decode 10 ms a step; r1 alone for its 5 tokens (prefill 100 ms in the first step).
    const { clock, e } = engine({ prefillMsPerToken: 0.1, kvCapacityTokens: 1500 });
    e.submit({ id: 'r1', adapter: null, promptTokens: 1000, maxTokens: 5 });
    expect(e.stats()).toMatchObject({ generationTokens: 0, decodeSeconds: 0 });
    await clock.run();
    expect(e.stats().generationTokens).toBe(5);
    // First token at the end of the first step; four more 10-ms steps to the last.
    expect(e.stats().decodeSeconds).toBeCloseTo(0.04, 6);
  });

  it("counts a request past its first token in the step that made it, not at its finish (vLLM's TTFT histogram)", async () => {
    // Decode 10 ms a step: r1's first token ends the first step, its last the tenth.
    const { clock, e } = engine();
    const seen: string[] = [];
    e.onFirstToken((r) => seen.push(r.id));
    e.submit({ id: 'r1', adapter: null, promptTokens: 10, maxTokens: 10 });
    e.submit({ id: 'r2', adapter: null, promptTokens: 10, maxTokens: 10 });
    await clock.run(15);
    expect(e.stats()).toMatchObject({ running: 2, firstTokensTotal: 2, finishedRequests: 0 });
    expect(seen).toEqual(['r1', 'r2']);
    // Aborted once past its first token: still counted, and not counted again.
    expect(e.abort('r2')).toBe(true);
    await clock.run();
    expect(e.stats()).toMatchObject({ running: 0, firstTokensTotal: 2 });
    expect(seen).toEqual(['r1', 'r2']);
  });

  it("counts a request's prompt tokens with its first token, not when scheduled; its prefix-cache lookup when scheduled (vLLM)", async () => {
    // Prefill 0.1 ms a token, decode 10 ms a step: r1's 1,600-token prompt takes a 170 ms step.
    const { clock, e } = engine({ prefillMsPerToken: 0.1, prefixCaching: true });
    const blocks = Array.from({ length: 100 }, (_, i) => `b${i}`);
    e.submit({ id: 'r1', adapter: null, promptTokens: 1600, maxTokens: 3, blocks });
    await clock.run(50);
    // Mid-step: scheduled (its prefix looked up), no first token yet, so no prompt tokens.
    expect(e.stats()).toMatchObject({
      running: 1,
      firstTokensTotal: 0,
      promptTokensTotal: 0,
      computedPromptTokensTotal: 0,
      prefixCacheQueries: 1600,
    });
    await clock.run(175);
    expect(e.stats()).toMatchObject({
      firstTokensTotal: 1,
      promptTokensTotal: 1600,
      computedPromptTokensTotal: 1600,
      cachedPromptTokensTotal: 0,
    });
    await clock.run();
    // r2 finds r1's blocks cached (all but its last token); aborted mid-step, before its first
    // token: its lookup counted, its prompt tokens never.
    e.submit({ id: 'r2', adapter: null, promptTokens: 1600, maxTokens: 3, blocks });
    e.submit({ id: 'r3', adapter: null, promptTokens: 3200, maxTokens: 3 });
    await clock.run(clock.now() + 100);
    expect(e.stats()).toMatchObject({ prefixCacheQueries: 6400, prefixCacheHits: 1599, firstTokensTotal: 1 });
    expect(e.abort('r2')).toBe(true);
    await clock.run();
    expect(e.stats()).toMatchObject({
      firstTokensTotal: 2,
      promptTokensTotal: 4800,
      computedPromptTokensTotal: 4800,
      cachedPromptTokensTotal: 0,
      prefixCacheHits: 1599,
    });
  });

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

  it("with vLLM's priority policy, admits waiting requests by (priority, arrival): lower first", async () => {
    // One slot: r0 runs; b1 (priority 1) came before i1 and i2 (priority 0), yet they go first.
    const { clock, e, done } = engine({ maxNumSeqs: 1, schedulingPolicy: 'priority' });
    e.submit({ id: 'r0', adapter: null, promptTokens: 1, maxTokens: 2 });
    e.submit({ id: 'b1', adapter: null, promptTokens: 1, maxTokens: 1, priority: 1 });
    e.submit({ id: 'i1', adapter: null, promptTokens: 1, maxTokens: 1 });
    e.submit({ id: 'i2', adapter: null, promptTokens: 1, maxTokens: 1, priority: 0 });
    await clock.run();
    expect(done.map((r) => r.id)).toEqual(['r0', 'i1', 'i2', 'b1']);
  });

  it('with the default policy (fcfs), admits in arrival order whatever the priority', async () => {
    const { clock, e, done } = engine({ maxNumSeqs: 1 });
    e.submit({ id: 'r0', adapter: null, promptTokens: 1, maxTokens: 2 });
    e.submit({ id: 'b1', adapter: null, promptTokens: 1, maxTokens: 1, priority: 1 });
    e.submit({ id: 'i1', adapter: null, promptTokens: 1, maxTokens: 1 });
    await clock.run();
    expect(done.map((r) => r.id)).toEqual(['r0', 'b1', 'i1']);
  });

  it('with the priority policy, does not preempt a running request for a slot (KV is reserved at admission)', async () => {
    const { clock, e, done } = engine({ maxNumSeqs: 1, schedulingPolicy: 'priority' });
    e.submit({ id: 'b0', adapter: null, promptTokens: 1, maxTokens: 3, priority: 1 });
    await clock.run(0);
    e.submit({ id: 'i1', adapter: null, promptTokens: 1, maxTokens: 1 });
    await clock.run();
    expect(done.map((r) => [r.id, r.start])).toEqual([
      ['b0', 0],
      ['i1', 30],
    ]);
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

  it('starts a load after the step under way, pauses engine steps while it runs, and serialises loads', async () => {
    const { clock, e, done } = engine();
    e.submit({ id: 'r', adapter: null, promptTokens: 1, maxTokens: 3 });
    await clock.run(0);
    const loaded: number[] = [];
    void e.loadWeights('x', 8).then(() => loaded.push(clock.now()));
    void e.loadWeights('y', 8).then(() => loaded.push(clock.now()));
    await clock.run();
    // The first step (0-10) runs to its end; the loads follow it, one after the other.
    expect(loaded).toEqual([510, 1010]);
    // Token at 10, then steps blocked until both loads are done: 1020, 1030.
    expect(done[0]!.end).toBe(1030);
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

  it('evicts the least recently used adapter even while it is in use, and reloads it at its next step', async () => {
    // max_cpu_loras = max_loras = 1: the load of b pushes out a, which a request is running on.
    const { clock, e, done } = engine({ maxCpuLoras: 1, maxLoras: 1 });
    e.preload('a', 8);
    e.submit({ id: 'long', adapter: 'a', promptTokens: 1, maxTokens: 3 });
    await clock.run(0);
    let afterLoad: unknown;
    void e.loadWeights('b', 8).then(() => (afterLoad = e.stats()));
    await clock.run();
    expect(afterLoad).toMatchObject({ cachedAdapters: ['b'], cacheEvictions: 1, running: 1 });
    // Steps at 0-10, load 10-510, then a's next step reloads it first (500 ms) and evicts b.
    expect(done[0]!.end).toBe(510 + 500 + 10 + 10);
    expect(e.stats()).toMatchObject({ cacheMissLoads: 1, cachedAdapters: ['a'], cacheEvictions: 2 });
  });
});

/**
 * A wall clock's timers as a loaded host fires them: every one `lagMs` late (virtual time, so
 * the test is deterministic). The HTTP simulator runs the engine on such a clock.
 */
function laggingClock(lagMs: number): VirtualClock & Clock {
  const c = new VirtualClock();
  const after = c.after.bind(c);
  c.after = (ms, fn) => after(ms + lagMs, fn);
  return c;
}

describe('ReplicaEngine on a host whose timers fire late', () => {
  async function makespan(clock: VirtualClock) {
    const e = new ReplicaEngine(clock, { prefillMsPerToken: 0.1, decodeMsPerStep: 20, maxNumSeqs: 16 });
    const done: RequestRecord[] = [];
    e.onRecord((r) => done.push(r));
    for (let i = 0; i < 12; i++) e.submit({ id: `r${i}`, adapter: null, promptTokens: 3000, maxTokens: 150 });
    // One more request arriving mid-run joins at the next step, as on time.
    clock.after(1000, () => e.submit({ id: 'late', adapter: null, promptTokens: 500, maxTokens: 50 }));
    await clock.run();
    return { end: Math.max(...done.map((r) => r.end!)), done, lag: e.lagStats() };
  }

  it('keeps its modelled throughput: the lag delays when a step is seen, it does not add up over steps', async () => {
    const onTime = await makespan(new VirtualClock());
    const late = await makespan(laggingClock(3));
    // 150 steps each fired 3 ms late: without catching up the run would end ~450 ms later.
    expect(late.end).toBeLessThanOrEqual(onTime.end + 3);
    expect(late.end).toBeGreaterThanOrEqual(onTime.end);
    // Per request the modelled first token and end are the on-time run's.
    const byId = new Map(onTime.done.map((r) => [r.id, r]));
    for (const r of late.done) {
      expect(r.firstToken).toBeCloseTo(byId.get(r.id)!.firstToken!, 6);
      expect(r.start!).toBeGreaterThanOrEqual(r.arrival);
    }
    expect(late.lag.steps).toBeGreaterThanOrEqual(150);
    expect(late.lag.totalMs).toBeGreaterThan(0);
    expect(onTime.lag.totalMs).toBe(0);
  });
});

describe('ReplicaEngine on a host that cannot keep up', () => {
  it('gives up a backlog past MAX_CATCH_UP_MS: a request that came meanwhile does not wait for it', async () => {
    // Every timer 300 ms late against 20 ms steps: the modelled timeline could never catch up.
    const clock = laggingClock(300);
    const e = new ReplicaEngine(clock, { prefillMsPerToken: 0, decodeMsPerStep: 20 });
    e.submit({ id: 'long', adapter: null, promptTokens: 1, maxTokens: 100 });
    let late: RequestRecord | undefined;
    let seenAt = 0;
    clock.after(1000, () => {
      late = e.submit({
        id: 'late',
        adapter: null,
        promptTokens: 1,
        maxTokens: 1,
        onToken: () => (seenAt = clock.now()),
      });
    });
    await clock.run();
    // When its token goes out on the clock: at most the bound, a few late timers and a step;
    // unbounded, the modelled timeline reaches its arrival only after ~60 steps x 320 ms.
    expect(seenAt - late!.arrival).toBeLessThan(2000);
    expect(late!.start!).toBeGreaterThanOrEqual(late!.arrival);
  });
});

describe('adapter load cost', () => {
  it('is the adapter bytes over the read bandwidth plus a fixed overhead', () => {
    // rank 16 on every linear layer of Llama-3.1-8B: 41.9M parameters, 84 MB in bf16.
    expect(loraParams(LLAMA_3_1_8B, 16)).toBe(41_943_040);
    expect(adapterBytes(defaultLoadCost, 16)).toBe(83_886_080);
    // Local NVMe by default: about 100 ms; rank 64 reads four times the bytes.
    expect(loadMs(defaultLoadCost, 16)).toBeCloseTo(60 + 41.94, 1);
    expect(loadMs(defaultLoadCost, 64) - 60).toBeCloseTo(4 * 41.94, 1);
    // Network storage at 100 MB/s: about 0.9 s.
    expect(loadMs({ ...defaultLoadCost, loadReadMBps: 100 }, 16)).toBeCloseTo(898.9, 1);
    const o = { ...defaultLoadCost, loadReadMBps: bandwidthFor(defaultLoadCost, 16, 3000) };
    expect(loadMs(o, 16)).toBeCloseTo(3000, 6);
    expect(() => bandwidthFor(defaultLoadCost, 16, 50)).toThrow(RangeError);
  });
});
