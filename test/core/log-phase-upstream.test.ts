/**
 * The log phase's two jobs, each on its own: the lease goes back once (a second release is an
 * error a caller can assert), and Kong's own 502/504 marks the replica down whatever became of
 * the lease (the answer is about the replica).
 */
import { LeaseNotOpen } from '../../src/lease';
import { logPhase } from '../../src/router/log-phase';
import type { RouteOutcome } from '../../src/router/router';
import { CoreHarness } from '../helpers/core-harness';
import { templatedRouter } from '../helpers/replicas';

const BASE = 'meta-llama/Llama-3.1-8B-Instruct';
const vllm = () => ({ adapterDirs: ['/adapters'], timeScale: 10 });

let h: CoreHarness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

async function routed(): Promise<Extract<RouteOutcome, { kind: 'proxy' }>> {
  h = await CoreHarness.start([vllm()], (urls) => templatedRouter(urls, BASE, {}));
  await h.nextPoll();
  const body = Buffer.from(JSON.stringify({ model: BASE, messages: [{ role: 'user', content: 'hi' }] }));
  const o = await h.router.route({ path: '/v1/chat/completions', body });
  if (o.kind !== 'proxy') throw new Error(`not routed: ${JSON.stringify(o)}`);
  return o;
}

it('RouterService.finish: a second release of one lease is an error', async () => {
  const o = await routed();
  await h!.router.finish(o.leaseId, 200);
  await expect(h!.router.finish(o.leaseId, 200)).rejects.toThrow(LeaseNotOpen);
});

it("Kong's own 502 marks the replica down though its lease is no longer open here", async () => {
  const o = await routed();
  await h!.router.finish(o.leaseId, 200); // given back (or reclaimed by age) before this log phase
  const record = { lease: o.leaseId, replica: o.url, stage: o.stage, adapter: o.adapter };
  await expect(logPhase(h!.rt, record, 502, async () => 'error')).rejects.toThrow(LeaseNotOpen);
  const [view] = await h!.rt.store.views([o.url]);
  expect(view!.health).toBe('down');
  // What the status page shows the operator of it.
  expect(view!.lastError).toBe('Kong could not proxy to it (502)');
});

/** Another request, routed on the harness `routed` started. */
async function again(): Promise<Extract<RouteOutcome, { kind: 'proxy' }>> {
  const body = Buffer.from(JSON.stringify({ model: BASE, messages: [{ role: 'user', content: 'hi' }] }));
  const o = await h!.router.route({ path: '/v1/chat/completions', body });
  if (o.kind !== 'proxy') throw new Error(`not routed: ${JSON.stringify(o)}`);
  return o;
}

/** The log phase of `o`'s request: `status`, `source` as Kong's `get_source` says. */
const logged = (o: Extract<RouteOutcome, { kind: 'proxy' }>, status: number, source: string) =>
  logPhase(
    h!.rt,
    { lease: o.leaseId, replica: o.url, stage: o.stage, adapter: o.adapter },
    status,
    async () => source,
  );

const health = async (url: string) => (await h!.rt.store.views([url]))[0]!.health;

describe('passive health counts only what the replica answered', () => {
  it.each([
    [503, 'exit', "a later plugin's 503 (request-termination after this plugin)"],
    [500, 'error', "Kong's own error other than 502/504"],
    [502, 'exit', "a later plugin's 502, which marks nothing down either"],
  ])("%p with source %p is not the replica's failure: %s", async (status, source) => {
    let o = await routed();
    for (let i = 0; i < 3; i++) {
      await logged(o, status, source);
      o = await again();
    }
    expect(await health(o.url)).toBe('up');
  });

  it("a client's 499 between the replica's failures does not start the count again", async () => {
    const o = await routed();
    await logged(o, 500, 'service');
    await logged(await again(), 500, 'service');
    await logged(await again(), 499, 'service');
    await logged(await again(), 500, 'service');
    expect(await health(o.url)).toBe('down');
  });

  it("a replica's own 503 still counts: three in a row take it out", async () => {
    const o = await routed();
    for (let i = 0; i < 3; i++) await logged(i === 0 ? o : await again(), 503, 'service');
    expect(await health(o.url)).toBe('down');
  });
  it('a 5xx whose source could not be asked still counts (as before it was asked): three take it out', async () => {
    const o = await routed();
    const record = (r: typeof o) => ({
      lease: r.leaseId,
      replica: r.url,
      stage: r.stage,
      adapter: r.adapter,
    });
    for (let i = 0; i < 3; i++) {
      const r = i === 0 ? o : await again();
      await logPhase(h!.rt, record(r), 500, () => Promise.reject(new Error('get_source failed')));
    }
    expect(await health(o.url)).toBe('down');
  });

  it("Kong's own 502s count in passive health too: three take it out where the marking is older news", async () => {
    let o = await routed();
    // A poll recorded as begun a minute from now (a wall clock stepped back since): the store
    // refuses the marking, dated now, as older news; the passive count is what is left.
    const now = Date.now();
    await h!.rt.store.applySnapshot(o.url, {
      at: now + 60_000,
      startedAt: now + 60_000,
      ok: true,
      load: { running: 0, waiting: 0, activeAdapters: [], malformedLines: 0 },
    });
    await logged(o, 502, 'error');
    expect(await health(o.url)).toBe('up');
    for (let i = 0; i < 2; i++) {
      o = await again();
      await logged(o, 502, 'error');
    }
    expect(await health(o.url)).toBe('down');
  });
});
