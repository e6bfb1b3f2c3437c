import { MemoryFleetStore } from '../src/fleet/memory-store';
import { seededRandom } from '../src/random';
import { defaultWeights, pipelineFor, SchedulingPipeline } from '../src/scheduler/pipeline';
import type { SchedulingContext } from '../src/scheduler/types';
import { LoadTimes } from '../src/work/load-times';
import { predictTtft } from '../src/work/predict';
import { WorkModel } from '../src/work/work-model';

/**
 * A seeded fleet of `replicas` x `adapters` that differs replica by replica and moves between
 * decisions, for predicted decisions whose every figure a digest records (bench/profile-decision.ts
 * `--case decision-varied --picks`): a change meant to decide exactly as before must leave the
 * digest as it was. Each replica holds its own share of the adapters; two pools; KV capacity
 * known on most; requests admitted where decided and released (completed or failed) at random;
 * scrapes that move the queue, KV use and the learned rates; replicas going down and up; loads
 * teaching per-adapter load times. `count`: the same fleet and requests under the count rule (no predictions).
 */
export async function variedBed(
  replicas: number,
  adapters: number,
  seed: number,
  saturationMode: 'count' | 'predicted' = 'predicted',
): Promise<{ decide: (i: number) => Promise<string> }> {
  const rand = seededRandom(seed);
  const int = (n: number) => Math.floor(rand() * n);
  let now = 1_700_000_000_000;
  const store = new MemoryFleetStore();
  const work = new WorkModel({ prefillTokensPerS: 8000 });
  const loads = new LoadTimes(1000, 100);
  const urls: string[] = [];
  for (let r = 0; r < replicas; r++) {
    const url = `http://10.0.${r >> 8}.${r & 255}:8000`;
    urls.push(url);
    await store.upsertReplica({ url, backend: 'vllm', priority: r % 8 === 7 ? 1 : 0 });
    // Most replicas hold few of the adapters, a few hold most: holders, free slots and full ones.
    const density = 0.001 + (r / replicas) ** 3 * 0.9;
    const registry = [];
    for (let a = 0; a < adapters; a++)
      if (rand() < density) registry.push({ name: `adapter-${a}`, path: `/adapters/adapter-${a}` });
    // Half the replicas' adapters are the router's loads (they take slots), half start-up ones.
    const managed = r % 2 === 0 ? () => true : undefined;
    await store.applySnapshot(url, { at: now, ok: true, registry, load: load(), managed });
    if (r % 4 !== 0) work.setKvCapacity(url, 32_768 + int(65_536));
  }
  function load() {
    return { waiting: int(6), running: int(12), kvUsage: rand(), activeAdapters: [], malformedLines: 0 };
  }
  // Per replica, cumulative histogram sums its scrapes report.
  const sums = urls.map(() => ({ prompt: 0, computed: 0, seconds: 0, gen: 0, requests: 0, decode: 0 }));
  const scrape = (r: number) => {
    const s = sums[r]!;
    const requests = 1 + int(20);
    s.prompt += requests * (500 + int(4000));
    s.computed += Math.floor(s.prompt * 0.1);
    s.seconds += 0.05 + rand();
    s.gen += requests * (50 + int(400));
    s.requests += requests;
    s.decode += 0.5 + rand() * 4;
    const l = load();
    work.observeReplica(
      urls[r]!,
      {
        ...l,
        promptTokensTotal: s.prompt,
        firstTokensTotal: s.requests,
        finishedPromptTokens: s.prompt,
        prefillSeconds: s.seconds,
        ...(r % 3 === 0 ? { finishedComputedTokens: s.computed, computedTokensTotal: s.computed } : {}),
        generationTokens: s.gen,
        finishedRequests: s.requests,
        decodeSeconds: s.decode,
      },
      now,
      now - int(100),
    );
    return store.applySnapshot(urls[r]!, { at: now, ok: true, load: l });
  };
  const pipeline = new SchedulingPipeline(
    pipelineFor({
      room_wait: 'escalate',
      scorer_weights: defaultWeights(),
      picker: 'p2c',
      saturation_mode: saturationMode,
    }),
  );
  const ctx: SchedulingContext = {
    now,
    random: seededRandom(seed + 1),
    policy: {
      saturation: { targetWaitingPerReplica: 2, kvCeiling: 0.8 },
      maxLoadedAdapters: Math.ceil(adapters * 0.3),
      staleAfterMs: 5000,
      saturationMode,
      saturationMarginMs: 250,
      ttftToleranceMs: 100,
    },
  };
  const open: { id: string; adapter: string }[] = [];
  const decide = async (i: number): Promise<string> => {
    now += int(40);
    ctx.now = now;
    // Skewed popularity: a few adapters take most requests.
    // and one in five (past the registries) held nowhere: a cold load's decision.
    const adapter = `adapter-${Math.floor((i % 2 === 0 ? rand() * rand() : rand()) * adapters * 1.25)}`;
    const req = {
      promptTokens: 100 + int(12_000),
      maxTokens: 50 + int(500),
      adapter,
      maxLoadedAdapters: ctx.policy.maxLoadedAdapters,
      queueTimeoutMs: 29_000,
    };
    const figures: number[] = [];
    const prefixSeed = int(1000);
    ctx.predict =
      saturationMode === 'count'
        ? undefined
        : (c) => {
            c.prefixTokens = ((prefixSeed * 31 + c.url.length * 7 + c.residentCount) % 5) * 256;
            const p = predictTtft(
              c,
              req,
              ctx.now,
              work,
              loads,
              c.residentCount % 11 === 0 ? false : undefined,
            );
            c.ttftMs = p.totalMs;
            c.loadMs = p.loadMs;
            c.fixedMs = p.fixedMs;
            c.ownMs = p.ownMs;
            c.cachedTokens = p.cachedTokens;
            figures.push(p.startMs, p.loadMs, p.fixedMs, p.aheadMs, p.ownMs, p.cachedTokens, p.totalMs);
          };
    const d = pipeline.schedule(
      { kind: 'on-demand', adapter: { name: adapter } },
      await store.views(urls, { name: adapter }),
      ctx,
    );
    if (d !== null) {
      const id = `lease-${i}`;
      const url = d.replica.url;
      await store.acquire({ id, url, adapter, at: now });
      work.admit({
        id,
        url,
        promptTokens: req.promptTokens,
        maxTokens: req.maxTokens,
        at: now,
        startMs: d.replica.holder ? 0 : loads.load(adapter),
        cachedTokens: d.replica.cachedTokens,
      });
      open.push({ id, adapter });
    }
    // About 100 open: a few per replica, as under load.
    while (open.length > 100 || (open.length > 0 && rand() < 0.5)) {
      const [o] = open.splice(int(open.length), 1);
      await store.release(o!.id, now, rand() < 0.97 ? 200 : 503);
      work.release(o!.id, now, rand() < 0.8);
    }
    await scrape(int(replicas));
    if (i % 13 === 0) loads.observe({ op: 'load', adapter, ok: true, ms: 200 + int(2000) });
    if (i % 101 === 0) {
      const r = int(replicas);
      await store.applySnapshot(urls[r]!, { at: now, ok: i % 202 !== 0, error: 'down', load: load() });
    }
    // The `load-backoff` filter came after b0f2ae1: no load fails in this bed, so it keeps what the
    // step before it kept, and is left out of the trail only then (the digests still prove the
    // decisions unchanged; a step that dropped a candidate would stay in and move them).
    const filters = d?.filters.filter(
      (f, k, all) => f.name !== 'load-backoff' || f.kept !== all[k - 1]?.kept,
    );
    const trail = d === null ? 'none' : `${d.replica.url} ${d.stage} ${JSON.stringify(filters)}`;
    return `${trail} ${d === null ? '' : JSON.stringify(d.scores)} ${figures.join(',')}\n`;
  };
  return { decide };
}
