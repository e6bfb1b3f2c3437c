/**
 * What the router answers itself (src/router/direct-answers.ts), alone: the replicas' management
 * paths refused (403), a method a path does not take (405, with Allow), the model list and one
 * card of it, and a request longer than the context of every replica that could serve it (400,
 * vLLM's text). Written against the mutants the routing suites left alive
 * (docs/reliability/mutation-testing.md).
 */
import { AdapterCatalog, type Resolved } from '../../src/adapters/catalog';
import { RouterError } from '../../src/errors';
import type { ReplicaView } from '../../src/fleet/types';
import type { FleetRuntime } from '../../src/runtime';
import { answerModels, checkContext, checkPath } from '../../src/router/direct-answers';
import type { RouteRequest } from '../../src/router/outcome';

async function refusal(
  f: () => unknown,
): Promise<{ status: number; code: string; message: string; allow?: string }> {
  try {
    await f();
  } catch (err) {
    if (!(err instanceof RouterError)) throw err;
    const { error } = err.body();
    return { status: err.status, code: error.code, message: error.message, allow: err.headers().Allow };
  }
  throw new Error('no refusal');
}

const asked = (path: string, method: string | undefined, body?: RouteRequest['body']) => {
  const calls: string[] = [];
  const req: RouteRequest = {
    path,
    body,
    method: method === undefined ? undefined : async () => (calls.push(method), method),
  };
  return { req, calls };
};

describe('checkPath', () => {
  it('refuses a management path with 403, whatever the method', async () => {
    const { req, calls } = asked('/llm/v1/load_lora_adapter', 'POST', '{}');
    expect(await refusal(() => checkPath(req))).toMatchObject({
      status: 403,
      code: 'forbidden',
      message: 'This path manages the replicas and is not available through the gateway.',
    });
    expect(calls).toEqual([]);
  });

  it('asks the method of the model list always, of an inference path only without a body', async () => {
    const get = asked('/v1/models', 'get');
    expect(await checkPath(get.req)).toBe('models');
    expect(get.calls).toEqual(['get']);
    const list = asked('/v1/models', 'POST', '{"a":1}');
    expect(await refusal(() => checkPath(list.req))).toMatchObject({ status: 405, allow: 'GET, HEAD' });
    const post = asked('/v1/models/x', 'POST', '{"a":1}');
    expect(await refusal(() => checkPath(post.req))).toMatchObject({
      status: 405,
      code: 'method_not_allowed',
      allow: 'GET, HEAD',
    });
    // A POST with a body: no PDK call for the method.
    const withBody = asked('/v1/chat/completions', 'GET', '{"model":"m"}');
    expect(await checkPath(withBody.req)).toBe('inference');
    expect(withBody.calls).toEqual([]);
    for (const body of [undefined, null, '', new Uint8Array(0)]) {
      const bodyless = asked('/v1/chat/completions', 'get', body);
      expect(await refusal(() => checkPath(bodyless.req))).toMatchObject({
        status: 405,
        message: 'Method GET is not allowed on this path; use POST.',
        allow: 'POST',
      });
    }
    // No rule for other paths, and no method asked.
    const other = asked('/v1/audio/transcriptions', 'DELETE');
    expect(await checkPath(other.req)).toBe('other');
    expect(other.calls).toEqual([]);
    // No method reader (the DES, some tests): nothing asked, nothing refused.
    expect(await checkPath({ path: '/v1/models', body: undefined })).toBe('models');
  });
});

const view = (url: string, over: Partial<ReplicaView> = {}): ReplicaView => ({
  url,
  backend: 'vllm',
  priority: 0,
  health: 'up',
  snapshotAt: 0,
  checkedAt: 0,
  waiting: 0,
  running: 0,
  inFlight: 0,
  residentCount: 0,
  ...over,
});
const runtimeWithLens = (lens: [string, number][]) =>
  ({ poller: { maxModelLen: new Map(lens) } }) as unknown as FleetRuntime;
const onDemand: Resolved = { kind: 'on-demand', adapter: { name: 'a' } } as Resolved;
const holding = { name: 'a', state: 'loaded' } as unknown as ReplicaView['adapter'];

describe('checkContext', () => {
  const t = (longestPromptTokens: number, maxTokens?: number) => ({
    promptTokens: longestPromptTokens,
    longestPromptTokens,
    maxTokens,
  });

  it('refuses only when every replica that could serve it reported a context too short', async () => {
    const rt = runtimeWithLens([
      ['http://a', 100],
      ['http://b', 150],
    ]);
    const views = [view('http://a'), view('http://b')];
    expect(await refusal(() => checkContext(rt, t(140, 20), onDemand, views, 4))).toMatchObject({
      status: 400,
      code: 'context_length_exceeded',
      message: expect.stringContaining("This model's maximum context length is 150 tokens."),
    });
    // The largest context of those that serve, in any order.
    expect(
      (await refusal(() => checkContext(rt, t(140, 20), onDemand, [...views].reverse(), 4))).message,
    ).toContain('maximum context length is 150 tokens');
    // Fits exactly on b (140 + 10 = 150): no refusal.
    expect(() => checkContext(rt, t(140, 10), onDemand, views, 4)).not.toThrow();
    // Without max_tokens one token of room is needed: 149 fits b, 150 does not.
    expect(() => checkContext(rt, t(149), onDemand, views, 4)).not.toThrow();
    expect((await refusal(() => checkContext(rt, t(150), onDemand, views, 4))).status).toBe(400);
    // A replica that reported no context may have room.
    expect(() => checkContext(rt, t(140, 20), onDemand, [...views, view('http://c')], 4)).not.toThrow();
  });

  it('counts only replicas that could serve the request; none reporting, or none serving: no refusal', () => {
    const rt = runtimeWithLens([
      ['http://a', 100],
      ['http://b', 1000],
    ]);
    // b is llama.cpp without the adapter: it cannot load it, so only a counts.
    const views = [view('http://a'), view('http://b', { backend: 'llamacpp' })];
    expect(() => checkContext(rt, t(200, 1), onDemand, views, 4)).toThrow(RouterError);
    // b holds it: it serves, with room.
    const held = [view('http://a'), view('http://b', { backend: 'llamacpp', adapter: holding })];
    expect(() => checkContext(rt, t(200, 1), onDemand, held, 4)).not.toThrow();
    // No loads (0): a does not serve either; nothing serves, nothing to refuse here.
    expect(() => checkContext(rt, t(200, 1), onDemand, views, 0)).not.toThrow();
    expect(() => checkContext(runtimeWithLens([]), t(200, 1), onDemand, views, 4)).not.toThrow();
  });
});

describe('answerModels', () => {
  const catalog = new AdapterCatalog({
    baseModel: 'base',
    adapters: [{ name: 'sql', path: '/a/sql', static: true }],
    namePattern: '^[a-z]+$',
  });
  const rt = { store: { dump: async () => ({ replicas: [] }) } } as unknown as FleetRuntime;
  const fleet = { baseModel: 'base', catalog, urls: [], loads: true };

  it('the list, one card of it, or 404 for an id it does not hold', async () => {
    const list = await answerModels(rt, '/v1/models', 'models', fleet);
    expect(list).toMatchObject({
      kind: 'respond',
      status: 200,
      headers: { 'Content-Type': 'application/json' },
    });
    expect((list as { body: { data: { id: string }[] } }).body.data.map((m) => m.id)).toEqual([
      'base',
      'sql',
    ]);
    const card = await answerModels(rt, '/v1/models/sql', 'model', fleet);
    expect(card).toMatchObject({ status: 200, body: { id: 'sql', root: '/a/sql', parent: 'base' } });
    expect(await refusal(() => answerModels(rt, '/v1/models/nope', 'model', fleet))).toMatchObject({
      status: 404,
      code: 'model_not_found',
      message: 'The model `nope` does not exist.',
    });
  });
});
