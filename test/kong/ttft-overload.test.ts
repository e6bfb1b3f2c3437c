/**
 * The hold-end refusal through the real plugin server and a simulated vLLM replica
 * (src/router/room-wait.ts `holdsNow`, its end): under `saturation_mode: predicted` and
 * `room_wait: escalate`, a request held because the replica is predicted past `ttft_slo_ms` is
 * still so when its hold ends, while late hold-ends have come for a whole hold and the gateway
 * holds three times as many requests as there are replicas: refused, 503 `ttft_overload` with
 * Retry-After in OpenAI's format. The first hold-ends of the overload are sent, and nothing a
 * refusal leaves behind (an in-flight count, its place among the held requests) keeps the fleet
 * from serving after.
 */
import type { KongDriver, PluginServerProcess } from '../../harness/kong/driver';
import { waitFor } from '../../harness/wait';
import { LocalGateway, type GatewayReply } from '../../stack/gateway';
import { BASE, chatBody, onDemand, startWorld, usePluginServer, vllm } from './world';

let driver: KongDriver;
let server: PluginServerProcess;
usePluginServer((s, d) => {
  server = s;
  driver = d;
});

/** The objective, and the queue bound: each hold lasts their difference, 1 s. */
const TTFT_SLO_MS = 2000;
const QUEUE_TIMEOUT_MS = 3000;
/** Held requests sent in waves, a wave every WAVE_GAP_MS: about 4 waves held at a time. */
const WAVES = 8;
const WAVE_SIZE = 4;
const WAVE_GAP_MS = 250;
/** Long prompts that make each overload. */
const JAM = 4;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

describe('ttft_overload, through the plugin server', () => {
  let w: Awaited<ReturnType<typeof startWorld>> | undefined;
  let jamRoute: LocalGateway | undefined;
  afterEach(async () => {
    await jamRoute?.close();
    await w?.stop();
    jamRoute = w = undefined;
  });

  it('refuses hold-ends under a sustained overload with 503 ttft_overload and Retry-After, sends the first ones, and leaves no in-flight or held count behind', async () => {
    // One sequence at a time, prefill at 1,000 tokens a modelled second (the router's prior too),
    // time 50x: each 60k-token jam prompt is predicted at 60 s and takes 1.2 s, so four of them
    // keep the replica past the 2 s objective for about 5 s, longer than the holds last.
    const replica = vllm({
      timeScale: 50,
      maxModelLen: 200_000,
      engine: { maxNumSeqs: 1, kvCapacityTokens: 1_000_000, prefillMsPerToken: 1 },
    });
    const common = { prefill_tokens_per_second: 1000 };
    w = await startWorld(driver, [replica], (u) =>
      onDemand(u, {
        ...common,
        saturation_mode: 'predicted',
        room_wait: 'escalate',
        ttft_slo_ms: TTFT_SLO_MS,
        queue_timeout_ms: QUEUE_TIMEOUT_MS,
      }),
    );
    // The overload comes through another route on the same node (it shares the replica's work
    // model, as two routes on one Kong node do), one that never holds.
    jamRoute = await LocalGateway.create({
      driver,
      plugins: [{ name: 'lora-router', config: onDemand(w.fleet.urls, { ...common, ttft_slo_ms: 0 }) }],
      serviceUrl: w.fleet.urls[0]!,
    });
    const send = (gw: LocalGateway, model: string, tokens: number) =>
      gw.handle({
        path: '/v1/chat/completions',
        headers: { 'content-type': 'application/json' },
        body: chatBody(model, tokens, 5),
      });
    const engine = w.fleet.replicas[0]!.engine;
    const logFrom = server.log.length;
    // The router has seen the replica, and both adapters are resident (the limit is two): the
    // held requests below need no load, so a refusal is the overload's alone.
    for (const model of [BASE, 'a', 'b']) expect((await send(w.service, model, 10)).status).toBe(200);

    // Long prompts through the jam route, differing from their first token: none is served from
    // another's cached prefix.
    const jamOf = (n: number, tag: string) =>
      Array.from({ length: n }, (_, i) =>
        jamRoute!.handle({
          path: '/v1/chat/completions',
          headers: { 'content-type': 'application/json' },
          body: Buffer.from(
            JSON.stringify({
              model: BASE,
              messages: [{ role: 'user', content: `${tag} ${i} ` + 'lorem ipsum '.repeat(20_000) }],
              max_tokens: 5,
            }),
          ),
        }),
      );
    // Held requests go only once a poll has seen the jam queued: a poll that began after the
    // router admitted a jam prompt but found the replica idle before the prompt reached it tells
    // the router it was prefilled (src/work/scrape-learning.ts, the idle case), and until a poll
    // sees the queue the router then predicts an idle replica (seen 2 times in about 20 runs
    // under load: singles below sent unheld). Seen waiting, the queue is predicted past the
    // objective from the poll's count whatever the router's own view.
    const polledWaiting = (n: number) =>
      waitFor(
        async () =>
          (await w!.statusJson()).replicas.find((r: { url: string }) => r.url === w!.fleet.urls[0]).waiting >=
          n,
        10_000,
        `a poll seeing ${n} waiting`,
      );
    const jam = jamOf(JAM, 'jam');
    await polledWaiting(2);

    // Waves of held requests, alternating the two resident adapters, one every 250 ms. Each
    // answer notes whether the jam still ran when it came.
    const jamRuns = () => engine.stats().running + engine.stats().waiting > 0;
    const waves: Promise<GatewayReply & { duringJam: boolean }>[][] = [];
    for (let i = 0; i < WAVES; i++) {
      if (i > 0) await sleep(WAVE_GAP_MS);
      waves.push(
        Array.from({ length: WAVE_SIZE }, (_, k) =>
          send(w!.service, k % 2 ? 'a' : 'b', 10).then((r) => ({ ...r, duringJam: jamRuns() })),
        ),
      );
    }
    const answers = await Promise.all(waves.map((wave) => Promise.all(wave)));
    for (const r of await Promise.all(jam)) expect(r.status).toBe(200);

    // The first wave's holds end together, the first late hold-ends of the overload: sent, not
    // refused (a refusal that fired on any backlog at the end of a hold would refuse them).
    expect(answers[0]!.map((r) => r.status)).toEqual(Array(WAVE_SIZE).fill(200));
    const all = answers.flat();
    const refused = all.filter((r) => r.status === 503);
    // Every request either served or refused for the overload, nothing else.
    expect(all.filter((r) => r.status !== 200 && r.status !== 503).map((r) => r.status)).toEqual([]);
    // Hold-ends a hold (1 s) after the first, under a backlog of the later waves: refused.
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused) {
      // Refused in the gateway while the replica was still overloaded, not for a drained queue.
      expect(r.duringJam).toBe(true);
      const body = JSON.parse(r.body.toString());
      expect(Object.keys(body)).toEqual(['error']);
      expect(body.error).toMatchObject({ type: 'server_error', code: 'ttft_overload' });
      expect(typeof body.error.message).toBe('string');
      expect(body.error.message).not.toMatch(/https?:\/\//);
      expect(r.headers['Retry-After']).toMatch(/^[1-9]\d*$/);
    }
    // Refused in the gateway: the replica saw only the requests that were served.
    const served = all.length - refused.length;
    expect(w.fleet.replicas[0]!.requestRecords()).toHaveLength(3 + JAM + served);

    // A later overload with few requests held at a time (one every 900 ms, each held 1 s: two at
    // most): its late hold-ends outlast a hold, but the gateway holds no backlog, so all go. Had
    // the refusals above kept their place in the held count, the gateway would stay backlogged
    // and these would be refused.
    const holds = async () =>
      Number(
        /^lora_router_ttft_holds_total (\d+)$/m.exec(
          (await w!.status.handle({ method: 'GET', path: '/lora/metrics' })).body.toString(),
        )![1],
      );
    const heldBefore = await holds();
    // One prompt more than the first: on a loaded machine the singles' pace lags.
    const jam2 = jamOf(JAM + 1, 'again');
    await polledWaiting(2);
    const singles: Promise<GatewayReply>[] = [];
    for (let i = 0; i < 4; i++) {
      if (i > 0) await sleep(900);
      singles.push(send(w.service, i % 2 ? 'a' : 'b', 10));
    }
    expect((await Promise.all(singles)).map((r) => r.status)).toEqual([200, 200, 200, 200]);
    for (const r of await Promise.all(jam2)) expect(r.status).toBe(200);
    // They were held (the overload was one), and sent at the end of their holds: at least the
    // first three, the third's hold ending more than a hold after the first's (a lagging machine
    // may send the last once the queue has drained).
    expect((await holds()) - heldBefore).toBeGreaterThanOrEqual(3);

    // Once the overload is over, a request through the same route is served at once.
    expect((await send(w.service, 'a', 10)).status).toBe(200);
    // A third adapter needs a slot: one of the two must be idle now, so no refusal left an
    // in-flight count behind (the load would wait for room, then 503).
    expect((await send(w.service, 'c', 10)).status).toBe(200);
    const unloads = w.fleet.replicas[0]!.adapterLog().filter((e) => e.op === 'unload' && e.status === 200);
    expect(unloads.length).toBeGreaterThanOrEqual(1);
    // No adapter unloaded under a request (the replica's own count when it was asked).
    for (const u of unloads) expect(u.inFlight ?? 0).toBe(0);

    const status = await w.statusJson();
    expect(status.inFlight).toBe(0);
    const here = status.replicas.find((r: { url: string }) => r.url === w!.fleet.urls[0]);
    expect(here.inFlight).toBe(0);
    for (const a of here.adapters) expect(a.inFlight).toBe(0);
    const metrics = (await w.status.handle({ method: 'GET', path: '/lora/metrics' })).body.toString();
    expect(metrics).toMatch(new RegExp(`code="ttft_overload"\\} ${refused.length}$`, 'm'));
    expect(metrics).toContain(`lora_router_in_flight{replica="${w.fleet.urls[0]}"} 0\n`);
    // Nothing failed on the way: no error from the router or the plugin server (warnings may be
    // a loaded machine's late polls).
    expect(server.log.slice(logFrom).filter((l) => /\] error:|\[ERROR\]/.test(l))).toEqual([]);
  });
});
