/**
 * Names and messages a client controls or sees (issue 16, items 9 and 11): per-name state is
 * bounded, an invented name evicts at most once per backoff window fleet-wide, and no error a
 * client receives names a replica's internal URL.
 */
import type { Logger } from '../../src/log';
import { CoreHarness } from '../helpers/core-harness';
import { waitFor } from '../../harness/wait';
import { collectingLogger } from '../helpers/log';
import { templatedRouter } from '../helpers/replicas';

const BASE = 'meta-llama/Llama-3.1-8B-Instruct';
/** Only these adapters exist on the replicas' disk: any other name is invented. */
const EXISTING = ['a', 'b', 'broken'];
const vllm = (over: Record<string, unknown> = {}) => ({
  adapterPaths: Object.fromEntries(EXISTING.map((n) => [`/adapters/${n}`, 16])),
  timeScale: 20,
  engine: { loadBaseMs: 200, maxLoras: 4 },
  ...over,
});
const onDemand = (urls: string[], extra: Record<string, unknown>) => templatedRouter(urls, BASE, extra);

/** host:port of every replica (a message may not name them in any form). */
const hostPorts = (h: CoreHarness) => h.fleet.urls.map((u) => new URL(u).host);

describe('what clients see of the replicas (item 11)', () => {
  let h: CoreHarness;
  afterEach(() => h?.stop());

  it('load failure, backoff and busy slots are answered without replica URLs; the URLs stay in the log', async () => {
    h = await CoreHarness.start([vllm()], (urls) =>
      onDemand(urls, { max_loaded_adapters: 1, backoff_base_ms: 60000, queue_timeout_ms: 200 }),
    );
    const log = collectingLogger();
    (h.rt as { log: Logger }).log = log;
    // The load calls' records (call-end.ts) write the replica's URL beside the adapter's name.
    (h.rt.manager as unknown as { ends: { log: Logger } }).ends.log = log;
    await h.fleet.replicas[0]!.fault({ kind: 'failLoads', count: 1 });
    const failed = await h.chat('broken');
    const backoff = await h.chat('broken');
    const busy = h.chat('a', 200);
    await waitFor(() => h.fleet.replicas[0]!.engine.inFlight('a') === 1);
    const noRoom = await h.chat('b');
    expect((await busy).status).toBe(200);
    const answers = [failed, backoff, noRoom];
    expect(answers.map((r) => [r.status, r.json.error.code])).toEqual([
      [502, 'adapter_load_failed'],
      [503, 'adapter_load_backoff'],
      [503, 'adapter_slots_busy'],
    ]);
    for (const r of answers) {
      const message = r.json.error.message as string;
      expect(message).toMatch(/'(broken|b)'/);
      for (const hp of hostPorts(h)) expect(message).not.toContain(hp);
      expect(message).not.toMatch(/https?:\/\//);
    }
    // The operator still learns where: the gateway log names the replica.
    const url = h.fleet.urls[0]!;
    expect(log.lines.some((l) => l.includes(url) && l.includes("'broken'"))).toBe(true);
    expect(log.lines.some((l) => l.includes(url) && l.includes("'b'"))).toBe(true);
  });
});

describe('client-invented adapter names (item 9)', () => {
  let h: CoreHarness;
  afterEach(() => h?.stop());

  it('3,000 invented names that fail to load leave bounded per-name state', async () => {
    // No cold-load budget here (it would answer 429 past its bound of loads a minute): the state is the point.
    h = await CoreHarness.start(
      [vllm()],
      (urls) => onDemand(urls, { max_loaded_adapters: 4, cold_loads_per_minute: 0 }),
      1000,
    );
    for (let i = 0; i < 3000; i++) {
      const r = await h.chat(`nope-${i}`);
      expect(r.status).toBe(404);
    }
    const backoff = (h.rt.manager as unknown as { backoff: { size: number } }).backoff;
    expect(backoff.size).toBeLessThanOrEqual(1024);
    expect(await h.rt.store.inFlightTotal()).toBe(0);
  }, 60_000);

  it('invented names on a full replica: one evicts, the next ones do not until the backoff window ends', async () => {
    h = await CoreHarness.start([vllm()], (urls) =>
      onDemand(urls, { max_loaded_adapters: 1, backoff_base_ms: 1000 }),
    );
    expect((await h.chat('a')).status).toBe(200); // the replica is full, 'a' idle
    const answers = [];
    for (let i = 0; i < 10; i++) {
      // The replica full again with an idle adapter, then a name nobody has.
      expect((await h.chat('a')).status).toBe(200);
      answers.push(await h.chat(`invented-${i}`));
    }
    expect(answers[0]!.status).toBe(404);
    // The rest are refused before any unload: 503 with Retry-After.
    for (const r of answers.slice(1)) {
      expect(r.status).toBe(503);
      expect(r.outcome.kind === 'respond' && Number(r.outcome.headers['Retry-After'])).toBeGreaterThan(0);
    }
    expect(h.unloads(0).length).toBeLessThanOrEqual(1);
    // A real adapter is not locked out: after the window it loads.
    await new Promise((r) => setTimeout(r, 1100));
    expect((await h.chat('b')).status).toBe(200);
    expect(await h.rt.store.inFlightTotal()).toBe(0);
  });
});
