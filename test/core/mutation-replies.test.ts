/**
 * The decoding of the Redis store's script replies (src/fleet/redis/replies.ts) alone, on replies
 * written as the scripts send them: each view's figures and their defaults, the requested
 * adapter's presence (resident, placed by another router, a llama.cpp static entry by path), the
 * residents with their in-flight counts, and leases.
 */
import {
  leaseOf,
  llamaOf,
  pairs,
  residentsOf,
  viewOf,
  viewsReply,
  type Reply,
} from '../../src/fleet/redis/replies';

const U = 'http://10.0.0.1:8000';
const V = 'http://10.0.0.2:8000';
const vllm = (url: string) => JSON.stringify({ url, backend: 'vllm', priority: 2 });
const llama = (url: string) => JSON.stringify({ url, backend: 'llamacpp', priority: 0 });
const res = (state: string, lastUsed: number, since = 1) => JSON.stringify({ state, lastUsed, since });

describe('viewOf', () => {
  it('reads every figure, and a replica never polled as unknown with zeros', () => {
    const full = viewOf(
      U,
      { url: U, backend: 'vllm', priority: 2 },
      pairs([
        'health',
        'up',
        'snapshotAt',
        '10',
        'checkedAt',
        '12',
        'lastError',
        'slow',
        'waiting',
        '3',
        'running',
        '4',
        'kvUsage',
        '0.25',
        'inFlight',
        '5',
        'residents',
        '6',
      ]),
    );
    expect(full).toEqual({
      url: U,
      backend: 'vllm',
      priority: 2,
      health: 'up',
      snapshotAt: 10,
      checkedAt: 12,
      lastError: 'slow',
      waiting: 3,
      running: 4,
      kvUsage: 0.25,
      inFlight: 5,
      residentCount: 6,
      llamaIds: undefined,
    });
    expect(viewOf(U, { url: U, backend: 'vllm', priority: 0 }, new Map())).toEqual({
      url: U,
      backend: 'vllm',
      priority: 0,
      health: 'unknown',
      snapshotAt: null,
      checkedAt: null,
      lastError: undefined,
      waiting: 0,
      running: 0,
      kvUsage: undefined,
      inFlight: 0,
      residentCount: 0,
      llamaIds: undefined,
    });
    // A reported 0 is a figure, not a missing one.
    expect(
      viewOf(U, { url: U, backend: 'vllm', priority: 0 }, pairs(['kvUsage', '0', 'snapshotAt', '0'])),
    ).toMatchObject({
      kvUsage: 0,
      snapshotAt: 0,
    });
  });

  it('llama.cpp: the ids of every listed adapter; none listed is an empty list', () => {
    const r = pairs([
      'llama',
      JSON.stringify([
        { id: 4, path: '/a', scale: 1 },
        { id: 7, path: '/b', scale: 1 },
      ]),
    ]);
    expect(viewOf(U, { url: U, backend: 'llamacpp', priority: 0 }, r).llamaIds).toEqual([4, 7]);
    expect(viewOf(U, { url: U, backend: 'llamacpp', priority: 0 }, new Map()).llamaIds).toEqual([]);
    expect(llamaOf(pairs(['llama', '']))).toEqual([]);
  });
});

describe('pairs', () => {
  it('pairs a flat list, dropping an odd last entry', () => {
    expect([...pairs(['a', '1', 'b', '2', 'c'])]).toEqual([
      ['a', '1'],
      ['b', '2'],
    ]);
    expect(pairs([]).size).toBe(0);
  });
});

describe('residentsOf', () => {
  it('each resident with its state, times and in-flight count (0 when none)', () => {
    expect(residentsOf(['a', res('loaded', 9, 3), 'b', res('loading', 0, 5)], ['a', '2'])).toEqual([
      { name: 'a', state: 'loaded', since: 3, lastUsed: 9, inFlight: 2 },
      { name: 'b', state: 'loading', since: 5, lastUsed: 0, inFlight: 0 },
    ]);
  });
});

describe('leaseOf', () => {
  it('an empty adapter is the base model', () => {
    expect(leaseOf(JSON.stringify({ id: 'l', url: U, adapter: '', at: 5, extra: 1 }))).toEqual({
      id: 'l',
      url: U,
      adapter: null,
      at: 5,
    });
    expect(leaseOf(JSON.stringify({ id: 'm', url: U, adapter: 'a', at: 6 })).adapter).toBe('a');
  });
});

describe('viewsReply', () => {
  const row = (
    url: string,
    spec: string,
    figures: string[],
    r: string | null,
    busy: string | null,
    all?: string[],
    allBusy?: string[],
  ): Reply[] => [url, spec, figures, r, busy, all ?? null, allBusy ?? null];

  it('carries the epoch and node count, and the adapter resident with its in-flight count', () => {
    const out = viewsReply(
      [null, [row(U, vllm(U), ['residents', '1'], res('loaded', 7), '3')], 'ep', [4, 900]],
      { name: 'a' },
      false,
    );
    expect(out.epoch).toBe('ep');
    expect(out.nodes).toEqual([4, 900]);
    expect(out.views).toHaveLength(1);
    expect(out.views[0]!.adapter).toEqual({ state: 'loaded', lastUsed: 7, inFlight: 3 });
    expect(out.views[0]!.residentCount).toBe(1);
    expect(out.views[0]!.residents).toBeUndefined();
    // No busy count: 0 in flight.
    const idle = viewsReply(
      [null, [row(U, vllm(U), [], res('loading', 0), null)], null, [1, 0]],
      { name: 'a' },
      false,
    );
    expect(idle.views[0]!.adapter).toEqual({ state: 'loading', lastUsed: 0, inFlight: 0 });
  });

  it('an adapter placed here by another router and not yet resident counts as loading, and takes a slot', () => {
    const out = viewsReply(
      [
        V,
        [row(U, vllm(U), ['residents', '2'], null, null), row(V, vllm(V), ['residents', '2'], null, null)],
        'ep',
        [1, 0],
      ],
      { name: 'a' },
      false,
    );
    expect(out.views[0]!.adapter).toBeUndefined();
    expect(out.views[0]!.residentCount).toBe(2);
    expect(out.views[1]!.adapter).toEqual({ state: 'loading', lastUsed: 0, inFlight: 0, placed: true });
    expect(out.views[1]!.residentCount).toBe(3);
  });

  it('no adapter asked: no presence, even where one is resident or placed', () => {
    const out = viewsReply([U, [row(U, vllm(U), [], res('loaded', 1), '1')], 'ep', [1, 0]], undefined, false);
    expect(out.views[0]!.adapter).toBeUndefined();
    expect(out.views[0]!.residentCount).toBe(0);
  });

  it('llama.cpp: a static entry found by path, with its id and in-flight count; none without a path', () => {
    const figures = ['llama', JSON.stringify([{ id: 3, path: '/models/a.gguf', scale: 1 }])];
    const hit = viewsReply(
      [U, [row(U, llama(U), figures, res('loaded', 1), '2')], 'ep', [1, 0]],
      { name: 'a', path: '/models/a.gguf' },
      false,
    );
    expect(hit.views[0]!.adapter).toEqual({ state: 'static', lastUsed: 0, inFlight: 2, llamaId: 3 });
    const idle = viewsReply(
      [null, [row(U, llama(U), figures, null, null)], 'ep', [1, 0]],
      { name: 'a', path: '/models/a.gguf' },
      false,
    );
    expect(idle.views[0]!.adapter).toEqual({ state: 'static', lastUsed: 0, inFlight: 0, llamaId: 3 });
    // Another path, or none: not there (and a placement is no presence on llama.cpp).
    for (const adapter of [{ name: 'a', path: '/models/b.gguf' }, { name: 'a' }]) {
      const miss = viewsReply(
        [U, [row(U, llama(U), figures, res('loaded', 1), '2')], 'ep', [1, 0]],
        adapter,
        false,
      );
      expect(miss.views[0]!.adapter).toBeUndefined();
      expect(miss.views[0]!.residentCount).toBe(0);
    }
  });

  it('with residents: every resident adapter and its in-flight count; none listed is an empty list', () => {
    const out = viewsReply(
      [
        null,
        [
          row(U, vllm(U), [], null, null, ['a', res('loaded', 4, 2)], ['a', '1']),
          row(V, vllm(V), [], null, null),
        ],
        'ep',
        [2, 0],
      ],
      { name: 'z' },
      true,
    );
    expect(out.views[0]!.residents).toEqual([
      { name: 'a', state: 'loaded', since: 2, lastUsed: 4, inFlight: 1 },
    ]);
    expect(out.views[1]!.residents).toEqual([]);
  });
});
