/**
 * The node's claim alone (src/fleet/node-claim.ts): which configurations are live, which replicas
 * they claim, and when a superseded one lapses.
 */
import { NodeClaim } from '../../src/fleet/node-claim';
import type { ReplicaSettings } from '../../src/runtime-settings';

const settings = (leaseMaxAgeMs: number) => ({ leaseMaxAgeMs }) as unknown as ReplicaSettings;
const GRACE = 60_000;

describe('NodeClaim', () => {
  it('a configuration of the same plugin supersedes the last; unused for the grace, its replicas are released', () => {
    const c = new NodeClaim();
    const a = c.register('p', 'A', ['u1', 'u2'], settings(1), 0);
    const b = c.register('p', 'B', ['u2', 'u3'], settings(2), 10);
    expect([a.superseded, b.superseded]).toEqual([true, false]);
    expect([...c.replicas.keys()].sort()).toEqual(['u1', 'u2', 'u3']);
    // u2's settings: the latest registered configuration's.
    expect(c.replicas.get('u2')).toBe(b.settings);
    expect(c.lapse(10 + GRACE - 1, GRACE)).toEqual([]);
    expect(c.lapse(10 + GRACE, GRACE)).toEqual(['u1']);
    expect([c.claims('u1'), c.releases('u1'), c.claims('u2')]).toEqual([false, true, true]);
    expect(c.size).toEqual({ live: 1, superseded: 0, released: 1 });
  });

  it('a request through a superseded configuration keeps it from lapsing, and brings a lapsed one back', () => {
    const c = new NodeClaim();
    const a = c.register('p', 'A', ['u1'], settings(1), 0);
    c.register('p', 'B', ['u2'], settings(1), 0);
    expect(c.used(a, 50_000)).toBe(false);
    expect(c.lapse(GRACE, GRACE)).toEqual([]);
    expect(c.lapse(50_000 + GRACE, GRACE)).toEqual(['u1']);
    expect(c.used(a, 200_000)).toBe(true);
    expect([c.claims('u1'), c.releases('u1')]).toEqual([true, false]);
  });

  it('the same configuration again (another worker, an old-config log phase) is one registration', () => {
    const c = new NodeClaim();
    const a = c.register('p', 'A', ['u1'], settings(1), 0);
    expect(c.register('p', 'A', ['u1'], settings(1), 1)).toBe(a);
    const b = c.register('p', 'B', ['u2'], settings(1), 2);
    // Registered again with no __seq__ to tell it older (a change back, or an old-config log phase): A is live again.
    expect(c.register('p', 'A', ['u1'], settings(1), 3)).toBe(a);
    expect([a.superseded, b.superseded]).toEqual([false, true]);
    expect(c.size).toEqual({ live: 1, superseded: 1, released: 0 });
  });

  it("an older configuration registered again (Kong's lower __seq__: an old-config log phase) is used, not live again", () => {
    const c = new NodeClaim();
    const a = c.register('p', 'A', ['u1'], settings(1), 0, 1);
    const b = c.register('p', 'B', ['u2'], settings(2), 10, 2);
    expect(c.register('p', 'A', ['u1'], settings(1), 20, 1)).toBe(a);
    expect([a.superseded, b.superseded]).toEqual([true, false]);
    expect(c.replicas.get('u2')).toBe(b.settings);
    // Kept once, not lapsed: a request through it is a use, not a return.
    expect(c.size).toEqual({ live: 1, superseded: 1, released: 0 });
    expect(c.used(a, 20)).toBe(false);
    // Idle past the grace: the old one lapses, the newer one stays claimed.
    expect(c.lapse(20 + GRACE, GRACE)).toEqual(['u1']);
    expect([c.claims('u1'), c.claims('u2')]).toEqual([false, true]);
    // Changed back (a newer __seq__): A is the plugin's configuration again.
    expect(c.register('p', 'A', ['u1'], settings(1), 30 + GRACE, 3)).not.toBe(b);
    expect([b.superseded, c.claims('u1')]).toEqual([true, true]);
  });

  it('an older configuration registered again after it lapsed (a request longer than the grace) is used, not live again', () => {
    const c = new NodeClaim();
    c.register('p', 'A', ['u1', 'u3'], settings(1), 0, 1);
    const b = c.register('p', 'B', ['u2', 'u3'], settings(2), 10, 2);
    expect(c.lapse(10 + GRACE, GRACE)).toEqual(['u1']);
    // Its log phase's instance: A comes back superseded, its replicas claimed for the grace from now.
    const back = c.register('p', 'A', ['u1', 'u3'], settings(1), 20 + GRACE, 1);
    expect([back.superseded, back.lapsed, b.superseded]).toEqual([true, false, false]);
    expect([c.claims('u1'), c.releases('u1'), c.replicas.get('u3')]).toEqual([true, false, b.settings]);
    expect(c.size).toEqual({ live: 1, superseded: 1, released: 0 });
    // Registered again with its lower __seq__ (another worker's log phase): the same one, used.
    expect(c.register('p', 'A', ['u1', 'u3'], settings(1), 30 + GRACE, 1)).toBe(back);
    expect(c.lapse(30 + 2 * GRACE - 1, GRACE)).toEqual([]);
    expect(c.lapse(30 + 2 * GRACE, GRACE)).toEqual(['u1']);
    expect([c.claims('u1'), c.claims('u2'), b.superseded]).toEqual([false, true, false]);
  });

  it('a configuration changed back within the grace (a higher __seq__) is live again', () => {
    const c = new NodeClaim();
    const a = c.register('p', 'A', ['u1'], settings(1), 0, 1);
    const b = c.register('p', 'B', ['u2'], settings(1), 10, 2);
    expect(c.register('p', 'A', ['u1'], settings(1), 20, 3)).toBe(a);
    expect([a.superseded, b.superseded]).toEqual([false, true]);
    expect(c.lapse(20 + GRACE, GRACE)).toEqual(['u2']);
  });

  it('a superseded configuration is kept once however often it is used, lapsed and used again, or live again', () => {
    const c = new NodeClaim();
    const a = c.register('p', 'A', ['u1'], settings(1), 0, 1);
    c.register('p', 'B', ['u2'], settings(1), 0, 2);
    // Used within the grace, twice: one entry, not lapsed (an early lapse marked it so).
    expect([c.lapse(GRACE - 1, GRACE), c.used(a, 10), c.used(a, 20)]).toEqual([[], false, false]);
    expect(c.size).toEqual({ live: 1, superseded: 1, released: 0 });
    // Lapsed, then used twice: back once.
    expect(c.lapse(20 + GRACE, GRACE)).toEqual(['u1']);
    expect([c.used(a, 30 + GRACE), c.used(a, 40 + GRACE)]).toEqual([true, false]);
    expect(c.size).toEqual({ live: 1, superseded: 1, released: 0 });
    // Changed back (a higher __seq__): live, and no longer among the superseded.
    c.register('p', 'A', ['u1'], settings(1), 50 + GRACE, 3);
    expect(c.size).toEqual({ live: 1, superseded: 1, released: 0 });
  });

  it('without a plugin id (keyed by its own JSON) a configuration is never superseded', () => {
    const c = new NodeClaim();
    c.register('A', 'A', ['u1'], settings(1), 0);
    c.register('B', 'B', ['u2'], settings(1), 0);
    expect(c.lapse(10 * GRACE, GRACE)).toEqual([]);
    expect(c.size).toEqual({ live: 2, superseded: 0, released: 0 });
  });

  it('a released replica is forgotten here once the store no longer lists it, and claimed again if listed', () => {
    const c = new NodeClaim();
    c.register('p', 'A', ['u1'], settings(1), 0);
    c.register('p', 'B', ['u2'], settings(1), 0);
    c.lapse(GRACE, GRACE);
    c.listed(new Set(['u1', 'u2']));
    expect(c.releases('u1')).toBe(true);
    c.listed(new Set(['u2']));
    expect(c.releases('u1')).toBe(false);
    c.register('q', 'C', ['u2', 'u1'], settings(1), GRACE);
    expect(c.claims('u1')).toBe(true);
  });

  it("takes a replaced runtime's configurations, the same objects", () => {
    const old = new NodeClaim();
    const a = old.register('p', 'A', ['u1'], settings(1), 0);
    const next = new NodeClaim();
    next.adopt(old, 0);
    expect(next.register('p', 'B', ['u2'], settings(1), 5)).not.toBe(a);
    expect(a.superseded).toBe(true);
    expect(next.lapse(5 + GRACE, GRACE)).toEqual(['u1']);
  });
  it("a configuration of another plugin, the same JSON as one superseded, is that plugin's own", () => {
    const c = new NodeClaim();
    const a = c.register('p', 'A', ['u1'], settings(1), 0);
    c.register('p', 'B', ['u2'], settings(1), 10);
    const q = c.register('q', 'A', ['u1'], settings(1), 20);
    expect(q).not.toBe(a);
    expect(q.key).toBe('q');
    expect(c.size).toEqual({ live: 2, superseded: 1, released: 0 });
  });

  it("a configuration live again leaves the other plugins' superseded ones claimed", () => {
    const c = new NodeClaim();
    c.register('p', 'A', ['u1'], settings(1), 0);
    c.register('p', 'B', ['u2'], settings(1), 0);
    c.register('q', 'X', ['u3'], settings(1), 0);
    c.register('q', 'Y', ['u4'], settings(1), 0);
    c.register('p', 'A', ['u1'], settings(1), 10);
    expect(['u1', 'u2', 'u3', 'u4'].map((u) => c.claims(u))).toEqual([true, true, true, true]);
    expect(c.size).toEqual({ live: 2, superseded: 2, released: 0 });
    expect(c.lapse(10 + GRACE, GRACE).sort()).toEqual(['u2', 'u3']);
  });

  it('keeps the highest __seq__ a configuration registered with, and one registered without any', () => {
    const c = new NodeClaim();
    const a = c.register('p', 'A', ['u1'], settings(1), 0, 5);
    const b = c.register('p', 'B', ['u2'], settings(1), 10, 10);
    // B again from an older worker's build (a lower __seq__), and with none: still known as 10.
    c.register('p', 'B', ['u2'], settings(1), 20, 3);
    c.register('p', 'B', ['u2'], settings(1), 30);
    expect(b.seq).toBe(10);
    // A's old-config log phase (seq 5 < 10): used, not live again.
    expect(c.register('p', 'A', ['u1'], settings(1), 40, 5)).toBe(a);
    expect([a.superseded, b.superseded]).toEqual([true, false]);
  });

  it('a superseded configuration not lapsed yet is not lapsed by another one lapsing', () => {
    const c = new NodeClaim();
    const a = c.register('p', 'A', ['u1'], settings(1), 0);
    c.register('p', 'B', ['u2'], settings(1), 0);
    const x = c.register('q', 'X', ['u3'], settings(1), 0);
    c.register('q', 'Y', ['u4'], settings(1), 0);
    c.used(x, 30_000);
    expect(c.lapse(GRACE, GRACE)).toEqual(['u1']);
    expect([a.lapsed, x.lapsed]).toEqual([true, false]);
    // A request through X: it was live all along.
    expect(c.used(x, GRACE + 1)).toBe(false);
    expect(c.size).toEqual({ live: 2, superseded: 1, released: 1 });
  });

  it('a lapsed configuration used again is live again once', () => {
    const c = new NodeClaim();
    const a = c.register('p', 'A', ['u1'], settings(1), 0);
    c.register('p', 'B', ['u2'], settings(1), 0);
    c.lapse(GRACE, GRACE);
    expect(c.used(a, GRACE + 1)).toBe(true);
    expect(c.used(a, GRACE + 2)).toBe(false);
    expect(c.size).toEqual({ live: 1, superseded: 1, released: 0 });
    expect(c.lapse(GRACE + 2 + GRACE, GRACE)).toEqual(['u1']);
  });

  it("keeps its own live configuration of a plugin over a replaced runtime's", () => {
    const old = new NodeClaim();
    old.register('p', 'B', ['u2'], settings(1), 0);
    const next = new NodeClaim();
    const c = next.register('p', 'C', ['u5'], settings(2), 0);
    next.adopt(old, 0);
    expect([c.superseded, next.claims('u5')]).toEqual([false, true]);
    expect(next.replicas.get('u5')).toBe(c.settings);
  });

  it("takes a replaced runtime's superseded configurations once, and its released replicas not claimed here", () => {
    const old = new NodeClaim();
    const a = old.register('p', 'A', ['u1'], settings(1), 0);
    old.register('p', 'B', ['u2'], settings(1), 0);
    old.register('q', 'X', ['u3'], settings(1), 0);
    old.register('q', 'Y', ['u4'], settings(1), 0);
    old.register('r', 'R', ['u6'], settings(1), 0);
    old.register('r', 'S', ['u7'], settings(1), 0);
    old.used(a, GRACE); // A stays superseded; X and R lapse: u3 and u6 released
    expect(old.lapse(GRACE, GRACE).sort()).toEqual(['u3', 'u6']);
    const next = new NodeClaim();
    next.register('z', 'Z', ['u3'], settings(1), GRACE); // claims u3 again
    next.adopt(old, GRACE);
    next.adopt(old, GRACE);
    expect(['u1', 'u2', 'u4', 'u7'].map((u) => next.claims(u))).toEqual([true, true, true, true]);
    expect([next.releases('u3'), next.releases('u6')]).toEqual([false, true]);
    expect(next.size).toEqual({ live: 4, superseded: 1, released: 1 });
  });
  it('an older configuration registered again after it lapsed (a request begun before the reload, logged past the grace) is used, not live again', () => {
    const c = new NodeClaim();
    c.register('p', 'A', ['u1'], settings(1), 0, 1);
    const b = c.register('p', 'B', ['u2'], settings(2), 10, 2);
    expect(c.lapse(10 + GRACE, GRACE)).toEqual(['u1']);
    // kong-pdk dropped A's idle instance; the long request's log phase starts it again: __seq__ 1.
    const again = c.register('p', 'A', ['u1'], settings(1), 20 + GRACE, 1);
    expect([again.superseded, b.superseded]).toEqual([true, false]);
    expect(c.replicas.get('u2')).toBe(b.settings);
    // B idle past the grace meanwhile: still the plugin's configuration, still claimed.
    expect(c.lapse(20 + 3 * GRACE, GRACE)).toEqual(['u1']);
    expect([c.claims('u1'), c.claims('u2')]).toEqual([false, true]);
  });

  it('a plugin moved to another runtime: its configuration here is superseded, an older one is only used, a newer one is live again', () => {
    const c = new NodeClaim();
    const a = c.register('p', 'A', ['u1'], settings(1), 0, 1);
    // Its newer configuration (`__seq__` 3) registered on the runtime of another record.
    c.movedAway('p', 3, 10);
    expect({ superseded: a.superseded, size: c.size, claims: c.claims('u1') }).toEqual({
      superseded: true,
      size: { live: 0, superseded: 1, released: 0 },
      claims: true,
    });
    // An old-config instance (`__seq__` 2, older than the moved one): used, not live again.
    expect(c.register('p', 'A', ['u1'], settings(1), 20, 2)).toBe(a);
    expect(c.size).toEqual({ live: 0, superseded: 1, released: 0 });
    expect(c.lapse(20 + GRACE, GRACE)).toEqual(['u1']);
    expect(c.size).toEqual({ live: 0, superseded: 0, released: 1 });
    // Changed back (`__seq__` 4): live here again.
    const back = c.register('p', 'A', ['u1'], settings(1), 30 + GRACE, 4);
    expect({ superseded: back.superseded, size: c.size }).toEqual({
      superseded: false,
      size: { live: 1, superseded: 0, released: 0 },
    });
  });
});
