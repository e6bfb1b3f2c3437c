import { SimFleet } from '../../sim/fleet';
import { call, chat, get, post } from '../helpers/http';
import { waitFor } from '../../harness/wait';

describe('simulator fault injection', () => {
  let fleet: SimFleet;
  const replica = () => fleet.replicas[0]!;
  let url: string;

  beforeEach(async () => {
    fleet = await SimFleet.start([
      {
        adapterDirs: ['/adapters'],
        staticAdapters: [{ name: 'static-a', path: '/adapters/static-a' }],
        timeScale: 20,
      },
    ]);
    url = fleet.urls[0]!;
  });
  afterEach(() => fleet.stop());

  it('kill refuses connections; revive listens again on the same port', async () => {
    await replica().fault({ kind: 'kill' });
    const refused = await fetch(url + '/health').then(
      () => null,
      (err: Error) => err,
    );
    expect((refused?.cause as NodeJS.ErrnoException | undefined)?.code).toBe('ECONNREFUSED');
    await replica().fault({ kind: 'revive' });
    expect((await get(url, '/health')).status).toBe(200);
  });

  it('kill drops requests in flight and the engine forgets them', async () => {
    const pending = post(url, '/v1/chat/completions', chat('static-a', 500)).catch((e: Error) => e);
    await waitFor(() => replica().engine.stats().running === 1);
    await replica().fault({ kind: 'kill' });
    expect(String(await pending)).toMatch(/fetch failed|terminated|other side closed/i);
    await waitFor(() => replica().engine.stats().running === 0);
    expect(replica().requestRecords().at(-1)!.aborted).toBe(true);
  });

  it('hang accepts connections and never answers', async () => {
    await replica().fault({ kind: 'hang', on: true });
    await expect(get(url, '/metrics', 200)).rejects.toThrow(/timeout|aborted/i);
    await replica().fault({ kind: 'hang', on: false });
    expect((await get(url, '/health')).status).toBe(200);
  });

  it('error500 answers every route with 500', async () => {
    await replica().fault({ kind: 'error500', on: true });
    for (const path of ['/health', '/metrics', '/v1/models']) expect((await get(url, path)).status).toBe(500);
    expect((await post(url, '/v1/chat/completions', chat('static-a'))).status).toBe(500);
  });

  it('slowMetrics delays /metrics only: a later /v1/models answers first', async () => {
    await replica().fault({ kind: 'slowMetrics', ms: 300 });
    const order: string[] = [];
    const metrics = get(url, '/metrics', 5000).then((r) => order.push(`metrics ${r.status}`));
    const models = get(url, '/v1/models', 5000).then((r) => order.push(`models ${r.status}`));
    await Promise.all([metrics, models]);
    expect(order).toEqual(['models 200', 'metrics 200']);
  });

  it('failLoads fails the next N loads, then loads succeed', async () => {
    await replica().fault({ kind: 'failLoads', count: 2 });
    const body = { lora_name: 'x', lora_path: '/adapters/x' };
    const a = await post(url, '/v1/load_lora_adapter', body);
    const b = await post(url, '/v1/load_lora_adapter', body);
    const c = await post(url, '/v1/load_lora_adapter', body);
    expect([a.status, b.status, c.status]).toEqual([500, 500, 200]);
    expect(a.json().error.message).toMatch(/Loading lora x failed/);
    expect(replica().registered()).toEqual(['static-a', 'x']);
  });

  it('dead makes /health 503 and completions fail', async () => {
    await replica().fault({ kind: 'dead', on: true });
    expect((await get(url, '/health')).status).toBe(503);
    expect((await post(url, '/v1/chat/completions', chat('static-a'))).status).toBe(500);
  });

  it('restart empties the registry of runtime-loaded adapters, keeping the start-up ones', async () => {
    expect(
      (await post(url, '/v1/load_lora_adapter', { lora_name: 'x', lora_path: '/adapters/x' })).status,
    ).toBe(200);
    expect(replica().registered()).toEqual(['static-a', 'x']);
    await replica().fault({ kind: 'restart', downtimeMs: 50 });
    const ids = (await get(url, '/v1/models')).json().data.map((m: { id: string }) => m.id);
    expect(ids).toEqual(['meta-llama/Llama-3.1-8B-Instruct', 'static-a']);
    expect((await post(url, '/v1/chat/completions', chat('x'))).status).toBe(404);
  });

  it('is driven over HTTP by the /_sim/ control API, which faults do not affect', async () => {
    let r = await call(url, '/_sim/fault', { body: { kind: 'error500', on: true } });
    expect(r.status).toBe(200);
    expect((await get(url, '/v1/models')).status).toBe(500);
    r = await get(url, '/_sim/state');
    expect(r.json()).toMatchObject({ backend: 'vllm', faults: { error500: true } });
    await call(url, '/_sim/fault', { body: { kind: 'clear' } });
    expect((await get(url, '/v1/models')).status).toBe(200);
    expect((await call(url, '/_sim/fault', { raw: 'nope' })).status).toBe(400);
    r = await call(url, '/_sim/fault', { body: { kind: 'kill' } });
    expect(r.status).toBe(202);
    await waitFor(async () => (await get(url, '/health', 200).catch(() => null)) === null, 2000, 'kill');
  });

  it('reports in /_sim/state the peak of runtime-loaded adapters registered at once, which unloads do not lower', async () => {
    const load = (name: string) =>
      post(url, '/v1/load_lora_adapter', { lora_name: name, lora_path: `/adapters/${name}` });
    const peak = async () => (await get(url, '/_sim/state')).json().peakRuntimeAdapters;
    expect(await peak()).toBe(0); // the start-up adapter does not count
    expect([(await load('x')).status, (await load('y')).status]).toEqual([200, 200]);
    expect((await post(url, '/v1/unload_lora_adapter', { lora_name: 'x' })).status).toBe(200);
    expect((await load('z')).status).toBe(200);
    expect(await peak()).toBe(2);
    for (const name of ['y', 'z'])
      expect((await post(url, '/v1/unload_lora_adapter', { lora_name: name })).status).toBe(200);
    expect(await peak()).toBe(2);
    expect((await load('w')).status).toBe(200);
    expect((await load('v')).status).toBe(200);
    expect((await load('u')).status).toBe(200);
    expect(await peak()).toBe(3);
  });

  it('logs every load and unload: the runtime adapters registered after it, and at unload the requests running and waiting', async () => {
    await post(url, '/v1/load_lora_adapter', { lora_name: 'y', lora_path: '/adapters/y' });
    await post(url, '/v1/load_lora_adapter', { lora_name: 'z', lora_path: '/adapters/z' });
    // One running, and one waiting behind an engine too small for two.
    replica().engine.options.maxNumSeqs = 1;
    const pending = [200, 200].map(() => post(url, '/v1/chat/completions', chat('y', 200)));
    await waitFor(() => replica().engine.inFlight('y') === 2);
    await post(url, '/v1/unload_lora_adapter', { lora_name: 'y' });
    const log = replica().adapterLog();
    expect(log.map((e) => [e.op, e.name, e.status, e.loaded])).toEqual([
      ['load', 'y', 200, 1],
      ['load', 'z', 200, 2],
      ['unload', 'y', 200, 1],
    ]);
    expect([log[2]!.inFlight, log[2]!.running, log[2]!.waiting]).toEqual([2, 1, 1]);
    expect(log.every((e) => Math.abs(e.wallMs! - Date.now()) < 60_000)).toBe(true);
    // Weights stay cached for running requests.
    expect((await Promise.all(pending)).map((r) => r.status)).toEqual([200, 200]);
  });
});
