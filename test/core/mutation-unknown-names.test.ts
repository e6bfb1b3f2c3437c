/**
 * Unit test of UnknownNames (src/adapters/unknown-names.ts, one module), written against the
 * survivors of its mutation run (docs/reliability/mutation-testing.md): a name nobody has seen
 * load, once not found on a replica, may not evict there for one backoff window; a name listed
 * or loaded before may; the window ends exactly at its end, per replica. The clock is a counter.
 */
import type { Clock } from '../../src/clock';
import { refusal } from '../helpers/refusal';
import { UnknownNames, VERIFIED_NAMES } from '../../src/adapters/unknown-names';

const BASE = 2_500;
const A = 'http://a:8000';
const B = 'http://b:8000';

function setup() {
  const t = { now: 1_000_000 };
  const clock: Clock = { now: () => t.now, after: () => () => undefined };
  return { t, names: new UnknownNames(clock) };
}

const policy = (listed: string[] = []) => ({
  backoffBaseMs: BASE,
  isListed: (n: string) => listed.includes(n),
});

describe('UnknownNames', () => {
  it('blocks unknown names on the replica where one was not found, for the backoff window', () => {
    const { t, names } = setup();
    expect(refusal(() => names.check(A, 'x', policy()))).toBeUndefined();
    names.notFound(A, 'invented-1', policy());
    const e = refusal(() => names.check(A, 'invented-2', policy()));
    expect(e?.code).toBe('adapter_name_cooldown');
    expect(e?.status).toBe(503);
    expect(e?.retryAfterS).toBe(3); // ceil(2.5 s)
    expect(e?.message).toContain("'invented-2'");
    expect(e?.internal).toContain(A);
    // Another replica is not blocked.
    expect(refusal(() => names.check(B, 'invented-2', policy()))).toBeUndefined();
    // Just before the end: still blocked, Retry-After at least 1 s.
    t.now += BASE - 1;
    expect(refusal(() => names.check(A, 'invented-3', policy()))?.retryAfterS).toBe(1);
    // At the end: free, and the block is gone for good.
    t.now += 1;
    expect(refusal(() => names.check(A, 'invented-3', policy()))).toBeUndefined();
    t.now -= 1; // a clock read earlier again finds no block left
    expect(refusal(() => names.check(A, 'invented-4', policy()))).toBeUndefined();
  });

  it('a listed or loaded name is never blocked, and never blocks', () => {
    const { names } = setup();
    names.notFound(A, 'listed', policy(['listed']));
    expect(refusal(() => names.check(A, 'invented', policy(['listed'])))).toBeUndefined();
    names.loaded('seen');
    names.notFound(A, 'seen', policy());
    expect(refusal(() => names.check(A, 'invented', policy()))).toBeUndefined();
    names.notFound(A, 'invented', policy());
    expect(refusal(() => names.check(A, 'listed', policy(['listed'])))).toBeUndefined();
    expect(refusal(() => names.check(A, 'seen', policy()))).toBeUndefined();
    expect(refusal(() => names.check(A, 'other', policy()))?.code).toBe('adapter_name_cooldown');
    // A policy without a list knows loaded names only.
    expect(refusal(() => names.check(A, 'seen', { backoffBaseMs: BASE }))).toBeUndefined();
    expect(refusal(() => names.check(A, 'listed', { backoffBaseMs: BASE }))?.code).toBe(
      'adapter_name_cooldown',
    );
  });

  it('a listed check answering other than true does not make a name known', () => {
    const { names } = setup();
    const truthy = { backoffBaseMs: BASE, isListed: () => 1 as unknown as boolean };
    names.notFound(A, 'x', truthy);
    expect(refusal(() => names.check(A, 'y', policy()))?.code).toBe('adapter_name_cooldown');
  });

  it('a second name not found restarts the window from then', () => {
    const { t, names } = setup();
    names.notFound(A, 'n1', policy());
    t.now += 2_000;
    names.notFound(A, 'n2', policy());
    t.now += 1_000; // 3 s after the first: past its window, within the second's
    expect(refusal(() => names.check(A, 'n3', policy()))?.retryAfterS).toBe(2);
  });

  it('remembers loaded names up to its bound, least recently loaded out first', () => {
    const { names } = setup();
    for (let i = 0; i <= VERIFIED_NAMES; i++) names.loaded(`n${i}`);
    names.notFound(A, 'fresh', policy());
    expect(refusal(() => names.check(A, 'n0', policy()))?.code).toBe('adapter_name_cooldown');
    expect(refusal(() => names.check(A, 'n1', policy()))).toBeUndefined();
    expect(refusal(() => names.check(A, `n${VERIFIED_NAMES}`, policy()))).toBeUndefined();
  });
});
