/**
 * `saturation_mode: predicted`'s per-request wiring (src/router/prediction.ts), alone: what
 * `ctx.predict` hands the TTFT prediction (src/work/predict.ts) for each candidate: the adapter
 * (only an on-demand one loads), the completion's default length, the prefix the index credits,
 * and whether a load could start now (known only once residents were read).
 */
import type { Resolved } from '../../src/adapters/catalog';
import { VirtualClock } from '../../src/clock';
import { silentLogger } from '../../src/log';
import { FleetRuntime } from '../../src/runtime';
import { predictFor } from '../../src/router/prediction';
import { PrefixIndex } from '../../src/scheduler/prefix-index';
import type { Candidate } from '../../src/scheduler/types';
import { predictTtft } from '../../src/work/predict';
import { DEFAULT_MAX_TOKENS } from '../../src/work/work-model';
import { cands, ctx as context, view } from './helpers';

const A = 'http://a:8000';
const onDemand = { kind: 'on-demand', adapter: { name: 'sql' } } as Resolved;
const config = { max_loaded_adapters: 1, queue_timeout_ms: 5000 };
const loaded = (name: string, inFlight: number) => ({
  name,
  state: 'loaded' as const,
  since: 0,
  lastUsed: 0,
  inFlight,
});

function setUp() {
  const rt = new FleetRuntime({ clock: new VirtualClock(), log: silentLogger, seed: 1 });
  rt.poller.stop();
  rt.loadTimes.observe({ op: 'load', adapter: 'sql', ok: true, ms: 2000 });
  const index = new PrefixIndex();
  const prompt = 'p'.repeat(3 * 256);
  index.record(index.blocks(prompt, 'sql'), A);
  return { rt, index, prompt };
}

/** What predictTtft gives for `c` with these inputs (the wiring's expected answer). */
function expected(
  rt: FleetRuntime,
  c: Candidate,
  now: number,
  adapter: string | undefined,
  maxTokens: number,
  roomNow?: boolean,
) {
  const copy = { ...c };
  return predictTtft(
    copy,
    { promptTokens: 100, maxTokens, adapter, maxLoadedAdapters: 1, queueTimeoutMs: 5000 },
    now,
    rt.work,
    rt.loadTimes,
    roomNow,
  );
}

/** A context whose `predict` is wired by predictFor for one request for `sql` (`maxTokens` 10 unless omitted). */
function wired(
  rt: FleetRuntime,
  opts: { resolved?: Resolved; prompt?: string; index?: PrefixIndex; maxTokens?: number | null } = {},
) {
  const ctx = context({ maxLoadedAdapters: 1 });
  const maxTokens = opts.maxTokens === null ? {} : { maxTokens: opts.maxTokens ?? 10 };
  predictFor(
    rt,
    ctx,
    { promptTokens: 100, longestPromptTokens: 100, ...maxTokens },
    opts.resolved ?? onDemand,
    opts.prompt,
    'sql',
    opts.index ?? new PrefixIndex(),
    config,
  );
  return ctx;
}

/** The one candidate on replica A, predicted in `ctx`. */
function predictedOnA(ctx: ReturnType<typeof wired>): Candidate {
  const [c] = cands([view(A)], ctx);
  ctx.predict!(c!, ctx);
  return c!;
}

describe('predictFor', () => {
  it('credits the prefix the index holds there, in tokens per block', () => {
    const { rt, index, prompt } = setUp();
    expect(predictedOnA(wired(rt, { prompt, index })).prefixTokens).toBe(3 * 64);
    // No prompt: no credit.
    expect(predictedOnA(wired(rt, { index, maxTokens: null })).prefixTokens).toBe(0);
    rt.stop();
  });

  it('an on-demand adapter loads there; the default completion length without max_tokens', () => {
    const { rt } = setUp();
    const ctx = wired(rt, { maxTokens: null });
    const c = predictedOnA(ctx);
    const p = expected(rt, c, ctx.now, 'sql', DEFAULT_MAX_TOKENS);
    expect(c.loadMs).toBeGreaterThan(0);
    expect([c.ttftMs, c.loadMs, c.fixedMs, c.ownMs]).toEqual([p.totalMs, p.loadMs, p.fixedMs, p.ownMs]);
    expect(Number.isFinite(c.ttftMs)).toBe(true);
    // A static adapter (no load): nothing to load.
    const stat = { kind: 'static', adapter: { name: 'sql' } } as Resolved;
    expect(predictedOnA(wired(rt, { resolved: stat, maxTokens: null })).loadMs).toBe(0);
    rt.stop();
  });

  it('with residents read, a full replica whose residents are all busy waits for room (a queue timeout)', () => {
    const { rt } = setUp();
    const ctx = wired(rt);
    const [busy, idle, unread] = cands(
      [
        view(A, { residentCount: 1, residents: [loaded('x', 1)] }),
        view(A, { residentCount: 1, residents: [loaded('x', 0)] }),
        view(A, { residentCount: 1 }),
      ],
      ctx,
    );
    for (const c of [busy!, idle!, unread!]) ctx.predict!(c, ctx);
    expect(busy!.ttftMs).toBe(expected(rt, busy!, ctx.now, 'sql', 10, false).totalMs);
    expect(idle!.ttftMs).toBe(expected(rt, idle!, ctx.now, 'sql', 10, true).totalMs);
    expect(unread!.ttftMs).toBe(expected(rt, unread!, ctx.now, 'sql', 10, undefined).totalMs);
    expect(busy!.ttftMs - idle!.ttftMs).toBe(5000);
    expect(unread!.ttftMs).toBe(idle!.ttftMs);
    // A holder never waits for room.
    const [holder] = cands(
      [
        view(A, {
          residentCount: 1,
          residents: [loaded('x', 1)],
          adapter: { state: 'loaded', lastUsed: 0, inFlight: 0 },
        }),
      ],
      ctx,
    );
    ctx.predict!(holder!, ctx);
    expect(holder!.ttftMs).toBe(expected(rt, holder!, ctx.now, 'sql', 10, undefined).totalMs);
    expect(holder!.loadMs).toBe(0);
    rt.stop();
  });
});
