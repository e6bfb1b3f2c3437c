import { countTokens } from '../../sim/http/openai';
import { silentLogger } from '../../src/log';
import { seededRandom } from '../../src/random';
import { FleetRuntime } from '../../src/runtime';
import { estimateTokens } from '../../src/work/estimate';
import { LoadTimes } from '../../src/work/load-times';
import { predictTtft } from '../../src/work/predict';
import { WorkModel } from '../../src/work/work-model';

const A = 'http://a:8000';
const B = 'http://b:8000';

/** The simulator's count for a chat body: what it answers in `usage.prompt_tokens`. */
function simChatTokens(messages: { content: string }[]): number {
  return countTokens(messages.map((m) => m.content).join('')) + 4 * messages.length;
}

describe('prompt token estimate', () => {
  it('counts chat messages as characters / 4 plus 4 a message, within 1% of the simulator', () => {
    const messages = [
      { role: 'system', content: 'You are a careful assistant. '.repeat(200) },
      {
        role: 'user',
        content: 'Summarise the document below.\n' + 'lorem ipsum dolor sit amet '.repeat(900),
      },
    ];
    const est = estimateTokens({ model: 'm', messages, max_tokens: 300 });
    const sim = simChatTokens(messages);
    expect(Math.abs(est.promptTokens - sim) / sim).toBeLessThan(0.01);
    expect(est.maxTokens).toBe(300);
  });

  it("matches the simulator's count exactly on generated chat bodies (same rule: characters / 4, 4 a message)", () => {
    const r = seededRandom(7);
    const words = [
      'the',
      'adapter',
      'replica',
      'prefill',
      'a',
      'long',
      'context',
      'système',
      '请求',
      'tokens',
    ];
    let worst = 0;
    for (let i = 0; i < 200; i++) {
      const messages = Array.from({ length: 1 + Math.floor(r() * 5) }, () => ({
        role: 'user',
        content: Array.from(
          { length: Math.floor(r() * 3000) },
          () => words[Math.floor(r() * words.length)],
        ).join(' '),
      }));
      const est = estimateTokens({ model: 'm', messages }).promptTokens;
      worst = Math.max(worst, Math.abs(est - simChatTokens(messages)));
    }
    expect(worst).toBe(0);
  });

  it('reads completion prompts (text, token ids) and max_completion_tokens', () => {
    expect(estimateTokens({ model: 'm', prompt: 'x'.repeat(4000) }).promptTokens).toBe(1000);
    expect(estimateTokens({ model: 'm', prompt: [1, 2, 3, 4, 5] }).promptTokens).toBe(5);
    expect(estimateTokens({ model: 'm', prompt: 'abcd', max_completion_tokens: 7 }).maxTokens).toBe(7);
    expect(estimateTokens({ model: 'm', prompt: 'abcd' }).maxTokens).toBeUndefined();
  });

  it('a batch of completion prompts: the sum for the work, the longest one for the context', () => {
    // vLLM checks each prompt of a batch against the context on its own.
    const three = estimateTokens({
      model: 'm',
      prompt: ['x'.repeat(12_000), 'y'.repeat(12_000), 'z'.repeat(4000)],
    });
    expect(three).toMatchObject({ promptTokens: 7000, longestPromptTokens: 3000 });
    const ids = estimateTokens({
      model: 'm',
      prompt: [
        [1, 2, 3],
        [4, 5, 6, 7, 8],
      ],
    });
    expect(ids).toMatchObject({ promptTokens: 8, longestPromptTokens: 5 });
    // One prompt of token ids, one string, one chat: the longest is the whole.
    expect(estimateTokens({ model: 'm', prompt: [1, 2, 3, 4, 5] }).longestPromptTokens).toBe(5);
    expect(estimateTokens({ model: 'm', prompt: 'x'.repeat(4000) }).longestPromptTokens).toBe(1000);
    const chat = estimateTokens({ model: 'm', messages: [{ role: 'user', content: 'abcd' }] });
    expect(chat.longestPromptTokens).toBe(chat.promptTokens);
  });

  it('counts text parts of multi-part chat content', () => {
    const est = estimateTokens({
      model: 'm',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'y'.repeat(400) }] }],
    });
    expect(est.promptTokens).toBe(100 + 4);
  });
});

describe('work model', () => {
  const rate = 10_000; // prior prefill tokens per second

  it('adds admitted prompt tokens to the replica queue and drains them at the prefill rate', () => {
    const w = new WorkModel({ prefillTokensPerS: rate });
    w.admit({ id: '1', url: A, promptTokens: 20_000, maxTokens: 100, at: 0 });
    w.admit({ id: '2', url: A, promptTokens: 10_000, maxTokens: 100, at: 0 });
    expect(w.queuedPrefill(A, 0)).toBe(30_000);
    expect(w.queuedPrefill(B, 0)).toBe(0);
    // One second at 10k tokens/s: 20k left.
    expect(w.queuedPrefill(A, 1000)).toBeCloseTo(20_000, 0);
    expect(w.view(A, 1000).decodeInFlight).toBe(0);
    // The first request's prefill is done by 2 s: it counts as decoding.
    expect(w.view(A, 2500).decodeInFlight).toBe(1);
  });

  it('the log phase removes a request: its prefill and every earlier one are done', () => {
    const w = new WorkModel({ prefillTokensPerS: rate });
    w.admit({ id: '1', url: A, promptTokens: 20_000, maxTokens: 100, at: 0 });
    w.admit({ id: '2', url: A, promptTokens: 10_000, maxTokens: 100, at: 0 });
    w.release('2', 100, true);
    expect(w.queuedPrefill(A, 100)).toBe(0);
    expect(w.view(A, 100).inFlight).toBe(1);
    w.release('1', 100, true);
    expect(w.view(A, 100)).toMatchObject({ inFlight: 0, queuedPrefillTokens: 0, kvReservedTokens: 0 });
  });

  it('a request that failed (a load error, no room, a 4xx) drops its own prefill only', () => {
    const w = new WorkModel({ prefillTokensPerS: rate });
    w.admit({ id: '1', url: A, promptTokens: 20_000, maxTokens: 100, at: 0 });
    w.admit({ id: '2', url: A, promptTokens: 10_000, maxTokens: 100, at: 0 });
    w.admit({ id: '3', url: A, promptTokens: 5_000, maxTokens: 100, at: 0 });
    // The last admission's load failed: the two before it are still queued.
    w.release('3', 100, false);
    expect(w.queuedPrefill(A, 100)).toBeCloseTo(29_000, 0);
    expect(w.view(A, 100)).toMatchObject({ inFlight: 2, kvReservedTokens: 30_200 });
    w.release('2', 100);
    expect(w.queuedPrefill(A, 100)).toBeCloseTo(19_000, 0);
    expect(w.view(A, 100).kvReservedTokens).toBe(20_100);
  });

  it("the replica's own figures override a smaller view (another gateway shares the replica)", () => {
    const w = new WorkModel({ prefillTokensPerS: rate });
    // This router admitted one short request; the replica reports 3 waiting, and its counters
    // say a request averages 8k prompt tokens (prompt_tokens_total / TTFT count).
    w.admit({ id: '1', url: A, promptTokens: 100, maxTokens: 10, at: 0 });
    w.observeReplica(A, { waiting: 3, running: 1, promptTokensTotal: 16_000, firstTokensTotal: 2 }, 0);
    expect(w.queuedPrefill(A, 0)).toBe(24_000);
    // It drains like the router's own view.
    expect(w.queuedPrefill(A, 1000)).toBeCloseTo(14_000, 0);
    // A smaller replica figure does not lower the router's own view.
    w.admit({ id: '2', url: B, promptTokens: 30_000, maxTokens: 10, at: 0 });
    w.observeReplica(B, { waiting: 0, running: 1 }, 0);
    expect(w.queuedPrefill(B, 0)).toBe(30_000);
  });

  it('does not take the prompt-token counter for the prefill rate: a queue waiting for KV room moves it at the decode pace', () => {
    const w = new WorkModel({ prefillTokensPerS: rate });
    // Four requests wait throughout, but for KV room: one long prompt is admitted (and counted)
    // only when a running request ends, 3,000 tokens a second, whatever the prefill speed.
    w.observeReplica(A, { waiting: 4, running: 2, promptTokensTotal: 0 }, 0);
    for (let t = 1; t <= 20; t++)
      w.observeReplica(A, { waiting: 4, running: 2, promptTokensTotal: t * 3000 }, t * 1000);
    expect(w.prefillRate(A)).toBe(rate);
  });

  it("learns the rate from vLLM's prefill-time and prompt-token histograms of finished requests", () => {
    const w = new WorkModel({ prefillTokensPerS: rate });
    // Each second two requests of 6,000 prompt tokens finish, each 2.4 s in its prefill phase:
    // 2,500 tokens per second of prefill, while the prompt-token counter says nothing of it.
    for (let t = 0; t <= 20; t++)
      w.observeReplica(
        A,
        {
          waiting: 1,
          running: 3,
          promptTokensTotal: t * 50_000,
          finishedPromptTokens: t * 12_000,
          prefillSeconds: t * 4.8,
        },
        t * 1000,
      );
    expect(w.prefillRate(A)).toBeGreaterThan(2300);
    expect(w.prefillRate(A)).toBeLessThan(2700);
    // An interval in which nothing finished says nothing.
    w.observeReplica(
      A,
      { waiting: 1, running: 3, finishedPromptTokens: 240_000, prefillSeconds: 96 },
      30_000,
    );
    expect(w.prefillRate(A)).toBeGreaterThan(2300);
  });

  it("learns the decode time per output token from vLLM's decode-time and generation-token histograms", () => {
    const w = new WorkModel({ prefillTokensPerS: rate, decodeMsPerToken: 25 });
    expect(w.decodeMsPerToken()).toBe(25);
    // Each second two requests finish, 301 tokens each (the first is the prefill's), 12 s of
    // decode each: 40 ms a token, long prefills sharing the steps included.
    for (let t = 0; t <= 40; t++)
      w.observeReplica(
        A,
        {
          waiting: 0,
          running: 8,
          finishedRequests: t * 2,
          generationTokens: t * 602,
          decodeSeconds: t * 24,
        },
        t * 1000,
      );
    expect(w.decodeMsPerToken()).toBeGreaterThan(38);
    expect(w.decodeMsPerToken()).toBeLessThan(42);
    // An interval in which nothing finished, or a restarted replica's fallen sums, says nothing.
    w.observeReplica(
      A,
      { waiting: 0, running: 8, finishedRequests: 80, generationTokens: 24_080, decodeSeconds: 960 },
      41_000,
    );
    w.observeReplica(
      A,
      { waiting: 0, running: 8, finishedRequests: 1, generationTokens: 301, decodeSeconds: 1 },
      42_000,
    );
    expect(w.decodeMsPerToken()).toBeGreaterThan(38);
    // It is what the KV wait counts: a request waiting for room waits for the decodes ahead.
    w.setKvCapacity(B, 64_000);
    w.admit({ id: 'k', url: B, promptTokens: 49_000, maxTokens: 1000, at: 0 });
    expect(w.kvWaitMs(B, 0, 20_000)).toBeGreaterThan((49_000 / rate) * 1000 + 38_000);
  });

  it('an idle replica report clears prefill the router still thought queued', () => {
    const w = new WorkModel({ prefillTokensPerS: rate });
    w.admit({ id: '1', url: A, promptTokens: 50_000, maxTokens: 10, at: 0 });
    w.observeReplica(A, { waiting: 0, running: 0 }, 500, 400);
    expect(w.queuedPrefill(A, 500)).toBe(0);
  });

  it('an idle replica report leaves queued what it has not counted yet (a request still on its way)', () => {
    const w = new WorkModel({ prefillTokensPerS: rate });
    w.observeReplica(A, { waiting: 0, running: 0, firstTokensTotal: 7 }, 0);
    // Admitted 5 ms before the scrape began: Kong still proxies it, the replica has not seen it.
    w.admit({ id: '1', url: A, promptTokens: 50_000, maxTokens: 10, at: 495 });
    w.observeReplica(A, { waiting: 0, running: 0, firstTokensTotal: 7 }, 510, 500);
    expect(w.queuedPrefill(A, 510)).toBeGreaterThan(40_000);
  });

  it('an idle replica report clears as many of ours, oldest first, as it counted first tokens since the last', () => {
    const w = new WorkModel({ prefillTokensPerS: rate });
    w.observeReplica(A, { waiting: 0, running: 0, firstTokensTotal: 7 }, 0);
    w.admit({ id: '1', url: A, promptTokens: 50_000, maxTokens: 10, at: 100 });
    w.admit({ id: '2', url: A, promptTokens: 30_000, maxTokens: 10, at: 495 });
    w.observeReplica(A, { waiting: 0, running: 0, firstTokensTotal: 8 }, 510, 500);
    // The first one's 50,000 are cleared; the second's 30,000 still queue.
    expect(w.queuedPrefill(A, 510)).toBeGreaterThan(29_000);
    expect(w.queuedPrefill(A, 510)).toBeLessThanOrEqual(30_000);
    // The next idle report counting it clears it; the first one is not counted twice.
    w.observeReplica(A, { waiting: 0, running: 0, firstTokensTotal: 9 }, 1010, 1000);
    expect(w.queuedPrefill(A, 1010)).toBe(0);
  });

  it('an idle replica report counts the first tokens of ours that completed since against the growth', () => {
    const w = new WorkModel({ prefillTokensPerS: rate });
    w.observeReplica(A, { waiting: 0, running: 0, firstTokensTotal: 7 }, 0);
    w.admit({ id: '1', url: A, promptTokens: 1000, maxTokens: 10, at: 100 });
    w.observeReplica(A, { waiting: 0, running: 1, firstTokensTotal: 7 }, 300, 290);
    w.release('1', 400, true);
    w.admit({ id: '2', url: A, promptTokens: 50_000, maxTokens: 10, at: 495 });
    // Still in its prefill at the busy report; the one first token since was the completed request's.
    w.observeReplica(A, { waiting: 0, running: 0, firstTokensTotal: 8 }, 510, 500);
    expect(w.queuedPrefill(A, 510)).toBeGreaterThan(40_000);
  });

  it('an idle replica report whose count fell (a restart) bounds ours by the new count', () => {
    const w = new WorkModel({ prefillTokensPerS: rate });
    w.observeReplica(A, { waiting: 0, running: 0, firstTokensTotal: 70 }, 0);
    w.admit({ id: '1', url: A, promptTokens: 50_000, maxTokens: 10, at: 100 });
    w.admit({ id: '2', url: A, promptTokens: 30_000, maxTokens: 10, at: 495 });
    w.observeReplica(A, { waiting: 0, running: 0, firstTokensTotal: 1 }, 510, 500);
    expect(w.queuedPrefill(A, 510)).toBeGreaterThan(29_000);
    expect(w.queuedPrefill(A, 510)).toBeLessThanOrEqual(30_000);
  });

  it('forgets requests older than the lease age (their log phase never came)', () => {
    const w = new WorkModel({ prefillTokensPerS: rate });
    w.admit({ id: '1', url: A, promptTokens: 50_000, maxTokens: 10, at: 0 });
    w.admit({ id: '2', url: A, promptTokens: 1000, maxTokens: 10, at: 200_000 });
    w.admit({ id: '3', url: B, promptTokens: 1000, maxTokens: 10, at: 300_000 });
    w.purge(700_000, 600_000);
    expect(w.view(A, 700_000).inFlight).toBe(1);
    expect(w.view(B, 700_000).inFlight).toBe(1);
    w.purge(850_000, 600_000);
    expect(w.view(A, 850_000).inFlight).toBe(0);
    expect(w.view(B, 850_000).inFlight).toBe(1);
  });

  it('is shared with the runtime that replaces it on the same shared state (one node, one queue per replica)', async () => {
    const old = new FleetRuntime({ log: silentLogger });
    const next = new FleetRuntime({ log: silentLogger, leasePrefix: old.leasePrefix });
    const id = old.nextLeaseId();
    old.work.admit({ id, url: A, promptTokens: 1000, maxTokens: 10, at: 0 });
    await old.retire(next);
    // The successor's decisions see the work admitted before the change.
    expect(next.work.view(A, 0).inFlight).toBe(1);
    next.work.release(id, 0, true);
    expect(next.work.view(A, 0).inFlight).toBe(0);
    old.stop();
    next.stop();
  });
});

describe('load times', () => {
  it('learns per adapter, falls back to the fleet figure, then to the prior', () => {
    const l = new LoadTimes(1000, 100);
    expect(l.load('x')).toBe(1000);
    l.observe({ op: 'load', adapter: 'x', ok: true, ms: 3000 });
    expect(l.load('x')).toBe(3000);
    expect(l.load('y')).toBeGreaterThan(1000);
    expect(l.load('y')).toBeLessThanOrEqual(3000);
    l.observe({ op: 'load', adapter: 'x', ok: false, ms: 5 });
    expect(l.load('x')).toBe(3000);
    l.observe({ op: 'unload', adapter: 'z', ok: true, ms: 40 });
    expect(l.unload()).toBe(40);
  });
});

describe('predicted TTFT', () => {
  const base = { promptTokens: 10_000, maxTokens: 100, maxLoadedAdapters: 2, queueTimeoutMs: 30_000 };
  const loads = new LoadTimes(1000, 100);
  loads.observe({ op: 'load', adapter: 'hot', ok: true, ms: 100 });
  loads.observe({ op: 'unload', adapter: 'old', ok: true, ms: 50 });

  it('a loaded holder: the prefill ahead plus its own, over the replica rate', () => {
    const w = new WorkModel({ prefillTokensPerS: 10_000 });
    w.admit({ id: '1', url: A, promptTokens: 20_000, maxTokens: 10, at: 0 });
    const p = predictTtft(
      { url: A, residentCount: 1, adapter: { state: 'loaded' }, holder: true },
      { ...base, adapter: 'hot' },
      0,
      w,
      loads,
    );
    expect(p).toMatchObject({ startMs: 0, aheadMs: 2000, ownMs: 1000, totalMs: 3000 });
  });

  it('a non-holder pays the learned load, and an unload when full', () => {
    const w = new WorkModel({ prefillTokensPerS: 10_000 });
    const free = predictTtft(
      { url: B, residentCount: 0, holder: false },
      { ...base, adapter: 'hot' },
      0,
      w,
      loads,
    );
    expect(free.totalMs).toBe(100 + 1000);
    const full = predictTtft(
      { url: B, residentCount: 2, holder: false },
      { ...base, adapter: 'hot' },
      0,
      w,
      loads,
    );
    expect(full.totalMs).toBe(100 + 50 + 1000);
  });

  it('with max_loaded_adapters 0 adds no unload (the router never unloads)', () => {
    const w = new WorkModel({ prefillTokensPerS: 10_000 });
    const p = predictTtft(
      { url: B, residentCount: 0, holder: false },
      { ...base, maxLoadedAdapters: 0, adapter: 'hot' },
      0,
      w,
      loads,
    );
    expect(p.totalMs).toBe(100 + 1000);
  });

  it('says which part of the wait no hold shortens: the adapter load there and the unload making room', () => {
    const w = new WorkModel({ prefillTokensPerS: 10_000 });
    const full = { url: B, residentCount: 2, holder: false };
    // Room now: the load and the unload take as long whenever it goes.
    expect(predictTtft(full, { ...base, adapter: 'hot' }, 0, w, loads)).toMatchObject({
      loadMs: 150,
      fixedMs: 150,
    });
    // No idle adapter: the wait for one to free shrinks as requests end; the load and unload do not.
    expect(predictTtft(full, { ...base, adapter: 'hot' }, 0, w, loads, false)).toMatchObject({
      loadMs: 30_150,
      fixedMs: 150,
    });
    // A load under way on the holder: going now joins it, so a hold gains nothing on it.
    const loading = { url: A, residentCount: 1, adapter: { state: 'loading' as const }, holder: true };
    expect(predictTtft(loading, { ...base, adapter: 'hot' }, 0, w, loads)).toMatchObject({ fixedMs: 100 });
  });

  it('a full replica with no idle adapter to unload waits up to the queue timeout', () => {
    const w = new WorkModel({ prefillTokensPerS: 10_000 });
    const p = predictTtft(
      { url: B, residentCount: 2, holder: false },
      { ...base, adapter: 'hot' },
      0,
      w,
      loads,
      false,
    );
    expect(p.startMs).toBe(100 + 50 + 30_000);
  });

  it('waits for KV room when the replica cannot hold the request beside what it runs', () => {
    const w = new WorkModel({ prefillTokensPerS: 10_000, decodeMsPerToken: 20 });
    // 50k of 64k reserved; the request needs 20k: the running one must finish its 1000 tokens.
    w.admit({ id: '1', url: A, promptTokens: 49_000, maxTokens: 1000, at: 0 });
    w.setKvCapacity(A, 64_000);
    const p = predictTtft(
      { url: A, residentCount: 1, adapter: { state: 'loaded' }, holder: true },
      { ...base, promptTokens: 19_000, maxTokens: 1000, adapter: 'hot' },
      0,
      w,
      loads,
    );
    // Its prefill ends at 4.9 s, then 1000 decode steps of 20 ms.
    expect(p.startMs).toBeCloseTo(4900 + 20_000, -2);
  });

  it('waits for a slot when the replica reports a queue its prefill and KV do not explain (all slots decoding)', () => {
    const w = new WorkModel({ prefillTokensPerS: 10_000, decodeMsPerToken: 20 });
    w.setKvCapacity(A, 1_000_000);
    // 16 short prompts, 100 ms apart, each decoding 300 tokens (6 s): request i ends near
    // i x 100 + 6050 ms. The replica reports 2 more waiting (another gateway's): slots are full.
    for (let i = 0; i < 16; i++)
      w.admit({ id: `d${i}`, url: A, promptTokens: 500, maxTokens: 300, at: i * 100 });
    w.observeReplica(A, { waiting: 2, running: 16 }, 2000);
    const req = { ...base, promptTokens: 500, maxTokens: 300, adapter: 'hot' };
    const holder = { url: A, residentCount: 1, adapter: { state: 'loaded' as const }, holder: true };
    const p = predictTtft(holder, req, 2000, w, loads);
    // The 2 waiting take the first two slots that free; its own is the third (request 2, near
    // 6250 ms): a 4.25 s wait, then its 50 ms prefill.
    expect(p.totalMs).toBeCloseTo(4300, -2);
    // A request this router admitted since the scrape queues too: one slot more to wait for.
    w.admit({ id: 'late', url: A, promptTokens: 500, maxTokens: 300, at: 2000 });
    expect(predictTtft(holder, req, 2000, w, loads).totalMs).toBeCloseTo(4400, -2);
    // A replica reporting no queue has a slot free: no slot wait.
    w.observeReplica(A, { waiting: 0, running: 15 }, 2000);
    expect(predictTtft(holder, req, 2000, w, loads).totalMs).toBeLessThan(200);
  });

  it("another gateway's queue, with no request of ours there: the replica's figures say the slot wait", () => {
    const w = new WorkModel({ prefillTokensPerS: 10_000, decodeMsPerToken: 20 });
    // Ours learned the typical request (500 prompt, 300 answer tokens), then ended.
    w.admit({ id: 'x', url: B, promptTokens: 500, maxTokens: 300, at: 0 });
    w.release('x', 100, true);
    // The replica runs 1 and has 2 waiting, none of them ours: 3 requests' decodes (300 x 20 ms
    // each, one slot) before this one starts.
    w.observeReplica(A, { waiting: 2, running: 1 }, 1000);
    const req = { ...base, promptTokens: 500, maxTokens: 300, adapter: 'hot' };
    const p = predictTtft(
      { url: A, residentCount: 1, adapter: { state: 'loaded' }, holder: true },
      req,
      1000,
      w,
      loads,
    );
    expect(p.totalMs).toBeGreaterThan(10_000);
  });
});
