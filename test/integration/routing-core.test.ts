import { CoreHarness } from '../helpers/core-harness';
import { waitFor } from '../../harness/wait';
import { templatedRouter } from '../helpers/replicas';

const BASE = 'meta-llama/Llama-3.1-8B-Instruct';
const vllm = (over: Record<string, unknown> = {}) => ({
  adapterDirs: ['/adapters'],
  timeScale: 10,
  engine: { loadBaseMs: 1000, maxLoras: 4 },
  ...over,
});

const onDemand = (urls: string[], extra: Record<string, unknown>) => templatedRouter(urls, BASE, extra);

describe('routing core against simulated replicas over HTTP', () => {
  let h: CoreHarness;
  afterEach(() => h?.stop());

  it('200 concurrent first requests for one cold adapter cause exactly one load', async () => {
    h = await CoreHarness.start([vllm(), vllm()], (urls) => onDemand(urls, { max_loaded_adapters: 4 }));
    const results = await Promise.all(Array.from({ length: 200 }, () => h.chat('cold', 1)));
    expect(results.map((r) => r.status)).toEqual(Array(200).fill(200));
    const loads = [...h.loads(0, 'cold'), ...h.loads(1, 'cold')];
    expect(loads).toHaveLength(1);
    expect(loads[0]!.status).toBe(200);
    // Everything went to the replica that loaded it: holders first.
    const holder = h.loads(0, 'cold').length === 1 ? 0 : 1;
    expect(h.fleet.replicas[holder]!.requestRecords()).toHaveLength(200);
    expect(await h.rt.store.inFlightTotal()).toBe(0);
  });

  it('with max_loaded_adapters=2, a third adapter unloads the least recently used idle one and never a busy one', async () => {
    h = await CoreHarness.start([vllm()], (urls) =>
      onDemand(urls, { max_loaded_adapters: 2, queue_timeout_ms: 10000 }),
    );
    await h.chat('a');
    await h.chat('b');
    await h.chat('a'); // b is now least recently used
    await h.chat('c');
    expect(h.unloads(0).map((e) => e.name)).toEqual(['b']);
    // Now keep c busy with a long request; a is idle: d must evict a, not c. Long enough (1,500
    // decode steps, about 3 s at time scale 10) to outlast d's load and e's wait on a loaded
    // machine: at 300 it ended under load before d was decided, and an idle c could go first.
    const long = h.chat('c', 1500);
    await waitFor(() => h.fleet.replicas[0]!.engine.inFlight('c') === 1);
    await h.chat('d');
    expect(h.unloads(0).map((e) => e.name)).toEqual(['b', 'a']);
    // Both slots busy (c and d in flight): e waits for one to go idle, then evicts it.
    const longD = h.chat('d', 100);
    await waitFor(() => h.fleet.replicas[0]!.engine.inFlight('d') === 1);
    const e = h.chat('e');
    const [rc, rd, re] = await Promise.all([long, longD, e]);
    expect([rc.status, rd.status, re.status]).toEqual([200, 200, 200]);
    const log = h.fleet.replicas[0]!.adapterLog();
    expect(log.filter((x) => x.op === 'unload').every((x) => x.inFlight === 0)).toBe(true);
    expect(h.unloads(0).map((x) => x.name)).toEqual(['b', 'a', 'd']);
  });

  it('a saturated holder spills the adapter to a second replica', async () => {
    // One sequence at a time on both: whichever replica the tie-break gives 'hot', three long
    // requests saturate it.
    const oneSeq = () => vllm({ engine: { maxNumSeqs: 1, loadBaseMs: 100 } });
    h = await CoreHarness.start([oneSeq(), oneSeq()], (urls) =>
      // The count rule's thresholds (test/kong/predicted-ttft.test.ts covers the predicted default).
      onDemand(urls, {
        saturation_mode: 'count',
        max_loaded_adapters: 2,
        target_waiting_per_replica: 2,
        picker: 'max-score',
      }),
    );
    const first = await h.chat('hot');
    const holder = first.outcome.kind === 'proxy' ? first.outcome.url : '';
    const hi = h.fleet.urls.indexOf(holder);
    const other = 1 - hi;
    // Saturate the holder directly (3 long requests, one slot: 2 waiting >= target 2).
    const replica = h.fleet.replicas[hi]!;
    const jam = Array.from({ length: 3 }, () =>
      fetch(`${holder}/v1/chat/completions`, {
        method: 'POST',
        body: JSON.stringify({ model: 'hot', messages: [{ role: 'user', content: 'x' }], max_tokens: 400 }),
      }).then((r) => r.text()),
    );
    await waitFor(() => replica.engine.stats().waiting >= 2);
    await h.nextPoll();
    const spilled = await h.chat('hot');
    expect(spilled.status).toBe(200);
    expect(spilled.outcome).toMatchObject({ kind: 'proxy', url: h.fleet.urls[other], stage: 'free' });
    expect(h.loads(other, 'hot')).toHaveLength(1);
    h.fleet.replicas[hi]!.engine.reset();
    await Promise.allSettled(jam);
  });

  it('a failing load answers 502, then backs off (503 with Retry-After) without another attempt', async () => {
    h = await CoreHarness.start([vllm()], (urls) =>
      onDemand(urls, { max_loaded_adapters: 2, backoff_base_ms: 60000 }),
    );
    await h.fleet.replicas[0]!.fault({ kind: 'failLoads', count: 10 });
    const a = await h.chat('broken');
    expect(a.status).toBe(502);
    expect(a.json.error).toMatchObject({ code: 'adapter_load_failed', type: 'server_error' });
    // The replica's text (on vLLM it can name storage paths) is logged, not told: a fixed reason.
    expect(a.json.error.message).toMatch(/'broken'.*the replica answered 500/);
    expect(a.json.error.message).not.toMatch(/simulated fault/);
    const b = await h.chat('broken');
    expect(b.status).toBe(503);
    expect(b.outcome.kind === 'respond' && b.outcome.headers['Retry-After']).toBe('60');
    expect(h.loads(0, 'broken')).toHaveLength(1);
    expect(await h.rt.store.inFlightTotal()).toBe(0);
  });

  it('notices a replica restart on the next poll and loads the adapter again', async () => {
    h = await CoreHarness.start([vllm()], (urls) => onDemand(urls, { max_loaded_adapters: 2 }));
    expect((await h.chat('a')).status).toBe(200);
    await h.fleet.replicas[0]!.fault({ kind: 'restart' });
    await h.nextPoll();
    const residents = await h.rt.store.residents(h.fleet.urls[0]!);
    expect(residents.map((r) => r.name)).toEqual([]);
    expect((await h.chat('a')).status).toBe(200);
    expect(h.loads(0, 'a').map((e) => e.status)).toEqual([200, 200]); // once before the restart, once after
    expect((await h.rt.store.events(20)).map((e) => e.op)).toContain('replica-restart');
  });

  it('sends an adapter to a llama.cpp replica only if it holds it, with the lora field set', async () => {
    h = await CoreHarness.start(
      [
        vllm(),
        {
          backend: 'llamacpp',
          staticAdapters: [{ path: '/models/x.gguf' }, { path: '/models/sql.gguf' }],
          timeScale: 10,
        },
      ],
      (urls) => ({
        replicas: [{ url: urls[0] }, { url: urls[1], backend: 'llamacpp' }],
        base_model: BASE,
        adapters: [
          { name: 'sql', path: 'sql.gguf', static: true },
          { name: 'chat', path: '/adapters/chat' },
        ],
        max_loaded_adapters: 2,
      }),
    );
    for (let i = 0; i < 10; i++) {
      const sql = await h.chat('sql');
      expect(sql.status).toBe(200);
      expect(sql.outcome).toMatchObject({ kind: 'proxy', url: h.fleet.urls[1] });
      expect(JSON.parse((sql.outcome as { body: string }).body).lora).toEqual([
        { id: 0, scale: 0 },
        { id: 1, scale: 1 },
      ]);
      const chat = await h.chat('chat');
      expect(chat.outcome).toMatchObject({ kind: 'proxy', url: h.fleet.urls[0] });
    }
    expect(h.fleet.replicas[1]!.requestRecords().every((r) => r.adapter === '/models/sql.gguf')).toBe(true);
  });

  it('answers GET /v1/models with what the whole fleet can serve', async () => {
    h = await CoreHarness.start(
      [vllm({ staticAdapters: [{ name: 'boot', path: '/adapters/boot' }] }), vllm()],
      (urls) =>
        onDemand(urls, { max_loaded_adapters: 2, adapters: [{ name: 'listed', path: '/adapters/listed' }] }),
    );
    await h.chat('dyn');
    const r = await h.router.route({ path: '/v1/models', body: '' });
    expect(r.kind).toBe('respond');
    const ids = (r as { body: { data: { id: string }[] } }).body.data.map((m) => m.id);
    expect(ids).toEqual([BASE, 'listed', 'boot', 'dyn']);
  });

  it('refuses admin paths and bad names without contacting any replica', async () => {
    h = await CoreHarness.start([vllm()], (urls) => onDemand(urls, { max_loaded_adapters: 2 }));
    const admin = await h.send('/v1/load_lora_adapter', { lora_name: 'x', lora_path: '/etc' });
    expect([admin.status, admin.json.error.code]).toEqual([403, 'forbidden']);
    const bad = await h.chat('../../etc/passwd');
    expect([bad.status, bad.json.error.code]).toEqual([400, 'invalid_model']);
    expect(h.fleet.replicas[0]!.adapterLog()).toEqual([]);
    expect(h.fleet.replicas[0]!.requestRecords()).toEqual([]);
  });

  it('room_wait anywhere: a cold adapter goes where an adapter is idle, and waits for room instead of failing', async () => {
    h = await CoreHarness.start([vllm(), vllm()], (urls) =>
      onDemand(urls, { max_loaded_adapters: 1, queue_timeout_ms: 10000, room_wait: 'anywhere' }),
    );
    // One adapter on each replica; keep the first busy.
    const a = await h.chat('a');
    const b = await h.chat('b');
    const ua = (a.outcome as { url: string }).url;
    const ub = (b.outcome as { url: string }).url;
    expect(ua).not.toBe(ub);
    const busyA = h.chat('a', 1500); // 3 s at time scale 10: outlasts the cold loads below
    await waitFor(() => h.fleet.replicas[h.fleet.urls.indexOf(ua)]!.engine.inFlight('a') === 1);
    for (let i = 0; i < 5; i++) {
      const c = await h.chat(`cold-${i}`);
      expect(c.status).toBe(200);
      expect((c.outcome as { url: string }).url).toBe(ub); // never behind the busy replica
    }
    // Now both busy: the next cold request waits for the first slot to free, then loads there.
    const busyB = h.chat('cold-4', 300);
    await waitFor(() => h.fleet.replicas[h.fleet.urls.indexOf(ub)]!.engine.inFlight('cold-4') === 1);
    const waited = await h.chat('late');
    expect(waited.status).toBe(200);
    await Promise.all([busyA, busyB]);
    const unloads = h.fleet.replicas.flatMap((r) => r.adapterLog().filter((e) => e.op === 'unload'));
    expect(unloads.every((e) => e.inFlight === 0)).toBe(true);
  });

  it('by default (room_wait escalate) a cold request whose chosen replica is all busy loads where a slot frees first, not 503', async () => {
    // Below a's 5 s, so waiting on a's replica would fail; far above b's 0.5 s, which a loaded
    // machine stretched past 2 s (a 503 in review-path's run at load 5.7 on 2 cores).
    const extra = { max_loaded_adapters: 1, queue_timeout_ms: 4500 };
    h = await CoreHarness.start([vllm(), vllm()], (urls) => onDemand(urls, extra));
    const ua = ((await h.chat('a')).outcome as { url: string }).url;
    const ub = ((await h.chat('b')).outcome as { url: string }).url;
    expect(ua).not.toBe(ub);
    const onA = h.fleet.replicas[h.fleet.urls.indexOf(ua)]!.engine;
    const onB = h.fleet.replicas[h.fleet.urls.indexOf(ub)]!.engine;
    // a busy for 5 s with one request; b busy for 0.5 s with two (the in-flight scorer prefers a's replica).
    const busyA = h.chat('a', 2500);
    await waitFor(() => onA.inFlight('a') === 1);
    const busyB = [h.chat('b', 250), h.chat('b', 250)];
    await waitFor(() => onB.inFlight('b') === 2);
    const late = await h.chat('late');
    expect(late.status).toBe(200);
    expect((late.outcome as { url: string }).url).toBe(ub);
    expect((await Promise.all([busyA, ...busyB])).map((r) => r.status)).toEqual([200, 200, 200]);
    const unloads = h.fleet.replicas.flatMap((r) => r.adapterLog().filter((e) => e.op === 'unload'));
    expect(unloads.every((e) => e.inFlight === 0)).toBe(true);
  });

  it('room_wait replica: waits on the chosen replica and answers 503 after queue_timeout_ms', async () => {
    h = await CoreHarness.start([vllm()], (urls) =>
      onDemand(urls, { max_loaded_adapters: 1, queue_timeout_ms: 300, room_wait: 'replica' }),
    );
    const busy = h.chat('a', 300);
    await waitFor(() => h.fleet.replicas[0]!.engine.inFlight('a') === 1);
    const r = await h.chat('b');
    expect([r.status, r.json.error.code]).toEqual([503, 'adapter_slots_busy']);
    expect((await busy).status).toBe(200);
  });
});
