/**
 * SloClasses and HeldClasses (src/router/slo-class.ts) alone, each built inside its case: the
 * objective, priority, shedding and gate a request gets (the room wait holds, delays and sheds by
 * them), and which held requests stand above another. Written against the mutants that
 * slo-classes.test.ts left alive (docs/reliability/mutation-testing.md).
 */
import { parseRouterConfig } from '../../src/config/parse';
import { HeldClasses, SloClasses } from '../../src/router/slo-class';

// Two classes share priority 5, with different objectives; premium's objective is looser than
// gold's and silver's, so "the least objective above" differs from "the least objective of all".
const CLASSES = [
  { name: 'premium', ttft_ms: 3000, priority: 10 },
  { name: 'gold', ttft_ms: 1500, priority: 5 },
  { name: 'silver', ttft_ms: 2500, priority: 5 },
  { name: 'interactive', ttft_ms: 2000, priority: 0 },
  { name: 'batch', ttft_ms: 30000, priority: -1 },
];
const classes = (over: Record<string, unknown> = {}) =>
  new SloClasses(
    parseRouterConfig({
      replicas: [{ url: 'http://r:8000' }],
      slo_classes: CLASSES,
      default_slo_class: 'interactive',
      ...over,
    }),
  );

describe('SloClasses: objective, priority, shedding and gate per class', () => {
  it('gates each class at the least objective of the classes strictly above it', () => {
    const c = classes();
    const vip = classes({ consumer_slo_class: { v: 'premium' } });
    // Nothing above premium: its own objective (not gold's 1500, the least of all).
    expect(vip.resolve({ consumer: { username: 'v' } })).toMatchObject({ name: 'premium', gateMs: 3000 });
    // Above silver only premium (3000), not gold at the same priority (1500).
    expect(vip.resolve({ objective: 'silver', consumer: { username: 'v' } })).toMatchObject({
      name: 'silver',
      objectiveMs: 2500,
      priority: 5,
      gateMs: 2500,
    });
    // Above interactive: the least of premium, gold, silver (1500), not the most (3000).
    expect(c.resolve({})).toMatchObject({
      name: 'interactive',
      objectiveMs: 2000,
      priority: 0,
      gateMs: 1500,
    });
    // Above batch, the least of all above it: interactive's 2000 does not matter, gold's 1500 does.
    expect(c.resolve({ objective: 'batch' }).gateMs).toBe(1500);
  });

  it('is sheddable below priority 0 only', () => {
    const c = classes({ consumer_slo_class: { v: 'premium' } });
    expect(c.resolve({ objective: 'batch' }).sheddable).toBe(true);
    expect(c.resolve({}).sheddable).toBe(false); // priority 0
    expect(c.resolve({ objective: 'gold', consumer: { username: 'v' } }).sheddable).toBe(false);
  });

  it('takes default_slo_class when set, else priority 0 and ttft_slo_ms', () => {
    expect(classes().resolve({})).toMatchObject({ name: 'interactive', objectiveMs: 2000 });
    const none = classes({ default_slo_class: undefined, ttft_slo_ms: 4000 });
    expect(none.resolve({})).toMatchObject({ name: '', objectiveMs: 4000, priority: 0, sheddable: false });
    expect(none.resolve({}).gateMs).toBe(1500);
    expect(none.resolve({ objective: 'batch' })).toMatchObject({ name: 'batch', objectiveMs: 30000 });
  });

  it('is enabled only with classes configured', () => {
    expect(classes().enabled).toBe(true);
    expect(classes({ slo_classes: [], default_slo_class: undefined }).enabled).toBe(false);
  });

  it('reads the objective header trimmed, and takes a class of the same priority as the default', () => {
    const c = classes({ consumer_slo_class: { g: 'gold' } });
    expect(c.resolve({ objective: ' batch ' }).name).toBe('batch');
    expect(c.resolve({ objective: 'silver', consumer: { username: 'g' } }).name).toBe('silver');
    expect(c.resolve({ objective: 'premium', consumer: { username: 'g' } }).name).toBe('gold');
  });

  it('matches a consumer by the fields it has: no username is not the username "undefined"', () => {
    const c = classes({ consumer_slo_class: { undefined: 'batch', 'id-g': 'gold', u: 'silver' } });
    expect(c.resolve({ consumer: { id: 'id-g' } }).name).toBe('gold');
    expect(c.resolve({ consumer: { username: 'u' } }).name).toBe('silver');
    expect(c.resolve({ consumer: { username: 'nobody' } }).name).toBe('interactive');
  });
});

describe('HeldClasses: whether a request of higher priority is held', () => {
  it('counts only strictly higher priorities, and forgets a priority once all its requests left', () => {
    const h = new HeldClasses();
    expect(h.above(-5)).toBe(false);
    h.enter(0);
    h.enter(0);
    expect(h.above(0)).toBe(false);
    expect(h.above(-1)).toBe(true);
    h.leave(0);
    expect(h.above(-1)).toBe(true);
    h.leave(0);
    expect(h.above(-1)).toBe(false);
  });
});
