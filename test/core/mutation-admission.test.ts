/**
 * Unit test of admission (src/router/admission.ts, one module), written against the survivors of
 * its mutation run (docs/reliability/mutation-testing.md): the lease taken on the decision's
 * replica is given back on every failure and handed to the proxy otherwise; the load runs only for
 * an on-demand adapter not held under the lease (vLLM: the state the lease read; llama.cpp: the
 * decision's), after the placement's claim, with the placement's recheck; a replica seen down
 * meanwhile gets no request unless every one still is; a lease old enough to be reclaimed is
 * replaced, at most four times. The runtime, store and leases are fakes; a counter clock.
 */
import type { Resolved } from '../../src/adapters/catalog';
import { PlacedElsewhere } from '../../src/adapters/claims';
import type { RouterConfig } from '../../src/config/router-schema';
import type { ReplicaView, ResidencyState } from '../../src/fleet/types';
import { LeaseHandle } from '../../src/lease';
import { admit, type AdmissionSetup } from '../../src/router/admission';
import { LastReplicas } from '../../src/router/guessed-lease';
import { SeenDown } from '../../src/router/placement';
import type { FleetRuntime } from '../../src/runtime';
import type { Candidate, Decision } from '../../src/scheduler/types';

const A = 'http://a:8000';
const B = 'http://b:8000';
const MAX_AGE = 1000;

interface World {
  t: number;
  /** Each lease taken: on which replica, for which adapter, its id. */
  takes: { url: string; adapter: string | null; id: string }[];
  released: string[];
  ensures: { url: string; adapter: unknown; policy: Record<string, unknown> }[];
  admitted: Record<string, unknown>[];
  remembered: [string | null, string][];
  stages: unknown[];
  recorded: unknown[];
  viewsAsked: unknown[][];
}

function world(opts: {
  /** States under each successive lease taken. */
  states?: (ResidencyState | undefined)[];
  /** Age each lease already has when taken (ms). */
  takenAge?: number;
  /** Time the load takes. */
  loadMs?: number;
  /** Health the store reports after the load, per URL. */
  after?: Record<string, ReplicaView['health']>;
  mode?: string | undefined;
  predictsWork?: boolean;
}) {
  const w: World = {
    t: 10_000,
    takes: [],
    released: [],
    ensures: [],
    admitted: [],
    remembered: [],
    stages: [],
    recorded: [],
    viewsAsked: [],
  };
  const states = opts.states ?? [undefined];
  const rt = {
    clock: { now: () => w.t },
    predictsWork: opts.predictsWork ?? false,
    work: { admit: (a: Record<string, unknown>) => w.admitted.push(a) },
    loadTimes: { load: (name: string) => (name === 'x' ? 777 : -1) },
    manager: {
      ensure: async (url: string, adapter: unknown, policy: Record<string, unknown>) => {
        w.ensures.push({ url, adapter, policy });
        if (w.ensures.length > 20) throw new Error('unbounded loads');
        w.t += opts.loadMs ?? 0;
      },
    },
    store: {
      mode: 'mode' in opts ? opts.mode : 'memory',
      views: async (urls: string[], ...rest: unknown[]) => {
        w.viewsAsked.push([urls, ...rest]);
        return urls
          .filter((u) => opts.after?.[u] !== undefined)
          .map((url) => ({ url, health: opts.after![url], checkedAt: w.t }) as ReplicaView);
      },
    },
    current: () => rt,
    metrics: {
      decided: (stage: string) => w.stages.push({ stage }),
      recent: { record: (what: string, at: number) => w.recorded.push([what, at]) },
    },
    log: { warn: () => undefined },
  } as unknown as FleetRuntime;
  jest.spyOn(LeaseHandle, 'take').mockImplementation(async (_rt, url, adapter) => {
    const n = w.takes.length;
    if (n > 20) throw new Error('unbounded retakes');
    const id = `L${n + 1}`;
    w.takes.push({ url, adapter, id });
    const lease = {
      id,
      lease: { url, at: w.t - (opts.takenAge ?? 0) },
      release: async () => {
        w.released.push(id);
        return undefined;
      },
    } as unknown as LeaseHandle;
    return { lease, state: states[Math.min(n, states.length - 1)] };
  });
  return { w, rt };
}

function setupOf(config: Partial<RouterConfig> = {}): AdmissionSetup {
  return {
    config: { lease_max_age_ms: MAX_AGE, saturation_mode: 'count', ...config } as RouterConfig,
    adapterPolicy: { queueTimeoutMs: 1 } as unknown as AdmissionSetup['adapterPolicy'],
    targets: new Map([
      [A, { host: 'a', port: 8000, https: false }],
      [B, { host: 'b', port: 8000, https: false }],
    ]),
    lastReplica: new LastReplicas(),
  };
}

function decisionOn(replica: Partial<Candidate> = {}): Decision {
  return {
    replica: { url: A, backend: 'vllm', health: 'up', ttftMs: 42, cachedTokens: 3, ...replica } as Candidate,
    stage: 'affinity',
    scores: {},
    filters: [],
  } as unknown as Decision;
}

const onDemand: Resolved = { kind: 'on-demand', adapter: { name: 'x', path: '/a/x' } };
const statik: Resolved = { kind: 'static', adapter: { name: 'x' } };
const base: Resolved = { kind: 'base' };

type Wait = Parameters<typeof admit>[6];
const tokens = { promptTokens: 10, maxTokens: 5 } as Parameters<typeof admit>[8];

async function run(
  rt: FleetRuntime,
  o: {
    setup?: AdmissionSetup;
    decision?: Decision;
    resolved?: Resolved;
    json?: Record<string, unknown> | null;
    /** The body's text (default: `json` serialised). */
    text?: string;
    wait?: Partial<Wait>;
    tokens?: Parameters<typeof admit>[8];
  } = {},
) {
  return admit(
    o.setup ?? setupOf(),
    rt,
    o.decision ?? decisionOn(),
    o.resolved ?? onDemand,
    o.json ? { json: o.json, text: o.text ?? JSON.stringify(o.json) } : { json: null },
    undefined,
    { queueMs: 5, until: 99_999, ...o.wait },
    async () => undefined,
    o.tokens,
    {},
  );
}

afterEach(() => jest.restoreAllMocks());

describe('admission: the lease', () => {
  it('is taken on the decision, handed to the proxy, and remembered only with a store mode', async () => {
    const { w, rt } = world({ states: ['loaded'] });
    const setup = setupOf();
    const out = await run(rt, { setup });
    expect(out).toEqual({
      kind: 'proxy',
      url: A,
      host: 'a',
      port: 8000,
      https: false,
      leaseId: 'L1',
      stage: 'affinity',
      adapter: 'x',
      body: undefined,
    });
    expect(w.takes).toEqual([{ url: A, adapter: 'x', id: 'L1' }]);
    expect(w.released).toEqual([]);
    expect(setup.lastReplica.get('x')).toBe(A);
    expect(w.stages).toEqual([{ stage: 'affinity' }]);
    expect(w.recorded).toEqual([['requests', 10_000]]);

    const other = world({ states: ['loaded'], mode: undefined });
    const setup2 = setupOf();
    await run(other.rt, { setup: setup2 });
    expect(setup2.lastReplica.get('x')).toBeUndefined();
  });

  it('for the base model names no adapter and loads nothing, on llama.cpp with no adapter either', async () => {
    const { w, rt } = world({});
    const out = await run(rt, { resolved: base, decision: decisionOn({ backend: 'llamacpp' }) });
    expect(out).toMatchObject({ kind: 'proxy', adapter: null, leaseId: 'L1' });
    expect(w.takes).toEqual([{ url: A, adapter: null, id: 'L1' }]);
    expect(w.ensures).toEqual([]);
    expect(w.released).toEqual([]);
  });

  it('is given back when the load fails, and the failure passed on', async () => {
    const { w, rt } = world({ states: [undefined] });
    (rt.manager as unknown as { ensure: () => Promise<void> }).ensure = () =>
      Promise.reject(new Error('no room'));
    await expect(run(rt)).rejects.toThrow('no room');
    expect(w.released).toEqual(['L1']);
  });
});

describe('admission: the load', () => {
  it('on vLLM follows the state under the lease, not the decision', async () => {
    const held = world({ states: ['loaded'] });
    await run(held.rt, { decision: decisionOn({ adapter: { state: 'unloading' } as Candidate['adapter'] }) });
    expect(held.w.ensures).toEqual([]);

    const gone = world({ states: [undefined] });
    await run(gone.rt, { decision: decisionOn({ adapter: { state: 'loaded' } as Candidate['adapter'] }) });
    expect(gone.w.ensures.map((e) => e.url)).toEqual([A]);
    expect(gone.w.ensures[0]!.adapter).toEqual({ name: 'x', path: '/a/x' });
  });

  it("on llama.cpp follows the decision's state", async () => {
    const held = world({ states: [undefined] });
    await run(held.rt, {
      decision: decisionOn({ backend: 'llamacpp', adapter: { state: 'loaded' } as Candidate['adapter'] }),
    });
    expect(held.w.ensures).toEqual([]);

    const gone = world({ states: ['loaded'] });
    await run(gone.rt, { decision: decisionOn({ backend: 'llamacpp' }) });
    expect(gone.w.ensures).toHaveLength(1);
  });

  it('runs only for an on-demand adapter neither loaded nor static', async () => {
    for (const [resolved, state, loads] of [
      [onDemand, 'loaded', 0],
      [onDemand, 'static', 0],
      [onDemand, 'loading', 1],
      [onDemand, 'unloading', 1],
      [onDemand, undefined, 1],
      [statik, undefined, 0],
      [statik, 'unloading', 0],
    ] as [Resolved, ResidencyState | undefined, number][]) {
      const { w, rt } = world({ states: [state] });
      await run(rt, { resolved });
      expect([resolved.kind, state, w.ensures.length]).toEqual([resolved.kind, state, loads]);
      jest.restoreAllMocks();
    }
  });

  it('passes the wait and the placement recheck to the manager', async () => {
    const recheck = async () => A;
    const place = async () => A;
    const both = world({ states: ['loading'] });
    await run(both.rt, { wait: { recheckPlacement: recheck, placeHere: place } });
    // keepLease: the lease kept young while the load waits (src/router/waiting-lease.ts).
    expect(both.w.ensures[0]!.policy).toEqual({
      queueTimeoutMs: 5,
      deadline: 99_999,
      keepLease: expect.any(Function),
      recheckPlacement: recheck,
    });

    const placeOnly = world({ states: ['loading'] });
    await run(placeOnly.rt, { wait: { placeHere: place } });
    expect(placeOnly.w.ensures[0]!.policy.recheckPlacement).toBe(place);

    const none = world({ states: [undefined] });
    await run(none.rt);
    expect(none.w.ensures[0]!.policy).toEqual({
      queueTimeoutMs: 5,
      deadline: 99_999,
      keepLease: expect.any(Function),
    });
  });

  it("claims the placement before a cold load, not while another's load is under way", async () => {
    let claims = 0;
    const placeHere = async () => {
      claims++;
      return A;
    };
    const cold = world({ states: ['unloading'] });
    await run(cold.rt, { wait: { placeHere } });
    expect(claims).toBe(1);
    expect(cold.w.ensures).toHaveLength(1);

    const loading = world({ states: ['loading'] });
    await run(loading.rt, { wait: { placeHere } });
    expect(claims).toBe(1);
    expect(loading.w.ensures).toHaveLength(1);
  });

  it("follows another node's placement: no load, the lease given back", async () => {
    const { w, rt } = world({ states: [undefined] });
    const err = await run(rt, { wait: { placeHere: async () => B } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PlacedElsewhere);
    expect(err).toMatchObject({ adapter: 'x', url: B });
    expect(w.ensures).toEqual([]);
    expect(w.released).toEqual(['L1']);
  });
});

describe('admission: a replica seen down during the load', () => {
  it('gets no request; the lease is given back', async () => {
    const { w, rt } = world({ states: [undefined], after: { [A]: 'down', [B]: 'up' } });
    await expect(run(rt)).rejects.toBeInstanceOf(SeenDown);
    expect(w.viewsAsked).toEqual([[[A], undefined, false]]);
    expect(w.released).toEqual(['L1']);
  });

  it('still up, or not in the reply, is proxied', async () => {
    for (const after of [{ [A]: 'up' }, { [A]: 'unknown' }, {}] as Record<string, ReplicaView['health']>[]) {
      const { w, rt } = world({ states: [undefined], after });
      expect(await run(rt)).toMatchObject({ kind: 'proxy', leaseId: 'L1' });
      expect(w.released).toEqual([]);
      jest.restoreAllMocks();
    }
  });

  it('decided down (every replica was) stays the decision while every one still is', async () => {
    const { w, rt } = world({ states: [undefined], after: { [A]: 'down', [B]: 'down' } });
    const out = await run(rt, { decision: decisionOn({ health: 'down' }) });
    expect(out).toMatchObject({ kind: 'proxy', leaseId: 'L1' });
    expect(w.viewsAsked).toEqual([[[A, B], undefined, false]]);
  });

  it('decided down, once another is seen up, gets no request', async () => {
    const { w, rt } = world({ states: [undefined], after: { [A]: 'down', [B]: 'up' } });
    await expect(run(rt, { decision: decisionOn({ health: 'down' }) })).rejects.toBeInstanceOf(SeenDown);
    expect(w.released).toEqual(['L1']);
    // Its own health read among the others', not the first replica's.
    const second = world({ states: [undefined], after: { [A]: 'up', [B]: 'down' } });
    const onB = decisionOn({ url: B, health: 'down' });
    await expect(run(second.rt, { decision: onB })).rejects.toBeInstanceOf(SeenDown);
    expect(second.w.released).toEqual(['L1']);
  });

  it('is not asked about when no load ran', async () => {
    const { w, rt } = world({ states: ['loaded'], after: { [A]: 'down', [B]: 'up' } });
    expect(await run(rt)).toMatchObject({ kind: 'proxy' });
    expect(w.viewsAsked).toEqual([]);
  });
});

describe('admission: a lease old enough to be reclaimed', () => {
  it('is replaced at half lease_max_age_ms, the fresh one taken before the old goes back', async () => {
    const { w, rt } = world({ states: [undefined, 'loaded'], loadMs: MAX_AGE / 2 });
    const out = await run(rt);
    expect(out).toMatchObject({ kind: 'proxy', leaseId: 'L2' });
    expect(w.takes.map((t) => t.id)).toEqual(['L1', 'L2']);
    expect(w.released).toEqual(['L1']);
    expect(w.ensures).toHaveLength(1);
  });

  it('is kept just under half, and at 0.6 of the age is replaced', async () => {
    const under = world({ states: [undefined], loadMs: MAX_AGE / 2 - 1 });
    expect(await run(under.rt)).toMatchObject({ leaseId: 'L1' });
    expect(under.w.released).toEqual([]);

    const over = world({ states: [undefined, 'loaded'], loadMs: 0.6 * MAX_AGE });
    expect(await run(over.rt)).toMatchObject({ leaseId: 'L2' });
    expect(over.w.released).toEqual(['L1']);
  });

  it('with an unload begun under the fresh lease loads again', async () => {
    const { w, rt } = world({ states: [undefined, 'unloading', 'loaded'], loadMs: MAX_AGE });
    expect(await run(rt)).toMatchObject({ leaseId: 'L3' });
    expect(w.ensures).toHaveLength(2);
    expect(w.released).toEqual(['L1', 'L2']);
  });

  it('is replaced at most four times, then 503 with every lease given back', async () => {
    const { w, rt } = world({ states: [undefined], loadMs: MAX_AGE });
    const err = await run(rt).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'adapter_slots_busy' });
    expect((err as Error).message).toContain("'x'");
    expect(w.takes).toHaveLength(5);
    expect(w.ensures).toHaveLength(5);
    expect(w.released).toEqual(['L1', 'L2', 'L3', 'L4', 'L5']);
  });

  it('for the base model, likewise, its 503 naming the base model', async () => {
    const { w, rt } = world({ takenAge: MAX_AGE });
    const err = await run(rt, { resolved: base }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'adapter_slots_busy' });
    expect((err as Error).message).toContain("'base'");
    expect((err as Error).message).toContain('it was unloaded each time it was about to be used');
    expect(w.takes).toHaveLength(5);
  });
});

describe('admission: the work model and the proxied request', () => {
  it('admits the work once before the load, with the load time, and once per fresh lease without', async () => {
    const { w, rt } = world({
      states: [undefined, 'unloading', 'loaded'],
      loadMs: MAX_AGE,
      predictsWork: true,
    });
    // With its class priority (batch: -1), which the work model counts its stalls by (awaitingFirstToken).
    await run(rt, { tokens, wait: { priority: -1 } });
    const admitted = { url: A, promptTokens: 10, maxTokens: 5, cachedTokens: 3, priority: -1 };
    expect(w.admitted).toEqual([
      { id: 'L1', ...admitted, at: 10_000, startMs: 777 },
      { id: 'L2', ...admitted, at: 11_000, startMs: 0 },
      { id: 'L3', ...admitted, at: 12_000, startMs: 0 },
    ]);
  });

  it('with no load, no start time; the default max tokens; nothing without a prediction or tokens', async () => {
    const { w, rt } = world({ states: ['loaded'], predictsWork: true });
    await run(rt, { tokens: { promptTokens: 10 } as typeof tokens });
    expect(w.admitted).toHaveLength(1);
    expect(w.admitted[0]).toMatchObject({ startMs: 0 });
    expect(typeof w.admitted[0]!.maxTokens).toBe('number');

    const baseLoad = world({ predictsWork: true });
    await run(baseLoad.rt, { tokens, resolved: base });
    expect(baseLoad.w.admitted[0]).toMatchObject({ startMs: 0 });

    const off = world({ states: ['loaded'] });
    await run(off.rt, { tokens });
    expect(off.w.admitted).toEqual([]);
    const noTokens = world({ states: ['loaded'], predictsWork: true });
    await run(noTokens.rt);
    expect(noTokens.w.admitted).toEqual([]);
  });

  it("with vllm_scheduling_policy priority, sets vLLM's priority field from the request's class (lower first)", async () => {
    const json = { model: 'x', prompt: 'hi' };
    const setup = setupOf({ vllm_scheduling_policy: 'priority' });
    // Batch (class priority -1): vLLM's 1, after every request of 0.
    const batch = await run(world({ states: ['loaded'] }).rt, { json, setup, wait: { priority: -1 } });
    expect(JSON.parse((batch as { body: string }).body)).toEqual({ ...json, priority: 1 });
    // Priority 0 is vLLM's default: the body goes as it came (no rewrite, no PDK call).
    expect(await run(world({ states: ['loaded'] }).rt, { json, setup, wait: { priority: 0 } })).toMatchObject(
      {
        body: undefined,
      },
    );
    // A client's own priority is replaced: it cannot put itself ahead of its class.
    const pushy = await run(world({ states: ['loaded'] }).rt, {
      json: { ...json, priority: -50 },
      setup,
      wait: { priority: 0 },
    });
    expect(JSON.parse((pushy as { body: string }).body)).toEqual({ ...json, priority: 0 });
    // fcfs (the default): the body is the client's, as vLLM without the flag refuses any priority but 0.
    expect(await run(world({ states: ['loaded'] }).rt, { json, wait: { priority: -1 } })).toMatchObject({
      body: undefined,
    });
    // llama.cpp has no such field: its body is the adapters' only.
    const llama = await run(world({}).rt, {
      json,
      setup,
      wait: { priority: -1 },
      decision: decisionOn({ backend: 'llamacpp' }),
    });
    expect(JSON.parse((llama as { body: string }).body)).toEqual({ ...json, lora: [] });
  });

  it("adds vLLM's priority to the client's bytes as the last member, whatever their layout", async () => {
    const setup = setupOf({ vllm_scheduling_policy: 'priority' });
    const bodyOf = async (json: Record<string, unknown>, text: string) =>
      (
        (await run(world({ states: ['loaded'] }).rt, { json, text, setup, wait: { priority: -2 } })) as {
          body: string;
        }
      ).body;
    expect(await bodyOf({ model: 'x', n: 1 }, ' { "model" : "x", "n": 1.0 }\r\n')).toBe(
      ' { "model" : "x", "n": 1.0 ,"priority":2}\r\n',
    );
    // No member yet: no comma.
    expect(await bodyOf({}, '{ }')).toBe('{ "priority":2}');
    // Its own value last overrides an earlier one (JSON.parse and Python's json keep the last).
    expect(await bodyOf({ priority: 7 }, '{"priority":7}')).toBe('{"priority":7,"priority":2}');
    expect(JSON.parse('{"priority":7,"priority":2}').priority).toBe(2);
  });

  it("adds llama.cpp's lora to the client's bytes as the last member, whatever their layout", async () => {
    const bodyOf = async (text: string) =>
      (
        (await run(world({}).rt, {
          json: JSON.parse(text) as Record<string, unknown>,
          text,
          decision: decisionOn({
            backend: 'llamacpp',
            adapter: { state: 'loaded', llamaId: 1 } as Candidate['adapter'],
            llamaIds: [0, 1],
          }),
        })) as { body: string }
      ).body;
    const lora = '"lora":[{"id":0,"scale":0},{"id":1,"scale":1}]';
    // A seed past 2^53 and a 1.0: parsed and serialised again, both would change.
    expect(await bodyOf(' { "model" : "x", "seed": 12345678901234567890, "temperature": 1.0 }\r\n')).toBe(
      ` { "model" : "x", "seed": 12345678901234567890, "temperature": 1.0 ,${lora}}\r\n`,
    );
    // No member yet: no comma.
    expect(await bodyOf('{ }')).toBe(`{ ${lora}}`);
    // The client's own lora stays and is overridden: llama.cpp's parser (nlohmann::json) keeps the last.
    expect(await bodyOf('{"lora":[{"id":0,"scale":1}]}')).toBe(`{"lora":[{"id":0,"scale":1}],${lora}}`);
  });

  it("shapes llama.cpp's body with every listed adapter, and the predicted TTFT when predicted", async () => {
    const { rt } = world({});
    const json = { model: 'x', prompt: 'hi' };
    const out = await run(rt, {
      json,
      decision: decisionOn({
        backend: 'llamacpp',
        adapter: { state: 'loaded', llamaId: 2 } as Candidate['adapter'],
        llamaIds: [1, 2],
      }),
      setup: setupOf({ saturation_mode: 'predicted' }),
    });
    expect(out).toMatchObject({ predictedTtftMs: 42 });
    expect(JSON.parse((out as { body: string }).body)).toEqual({
      ...json,
      lora: [
        { id: 1, scale: 0 },
        { id: 2, scale: 1 },
      ],
    });

    const bare = world({});
    const out2 = await run(bare.rt, { json, resolved: base, decision: decisionOn({ backend: 'llamacpp' }) });
    expect(JSON.parse((out2 as { body: string }).body)).toEqual({ ...json, lora: [] });
    expect(out2).not.toHaveProperty('predictedTtftMs');

    const vllm = world({ states: ['loaded'] });
    expect(await run(vllm.rt, { json })).toMatchObject({ body: undefined });
    const noJson = world({});
    expect(
      await run(noJson.rt, {
        decision: decisionOn({ backend: 'llamacpp', adapter: { state: 'loaded' } as never }),
      }),
    ).toMatchObject({ body: undefined });
  });
});
