/**
 * Unit test of the guessed lease (src/router/guessed-lease.ts, one module), written against the
 * survivors of its mutation run (docs/reliability/mutation-testing.md): a lease taken on the
 * adapter's last replica before the decision is used only if the decision goes there, else given
 * back once, not waited for, its failure logged (in the call or later); the last replicas
 * are remembered per adapter, bounded, the oldest out first. Leases are fakes recording releases.
 */
import { LeaseHandle } from '../../src/lease';
import type { FleetRuntime } from '../../src/runtime';
import { giveBack, LastReplicas, takeLease, type GuessedLease } from '../../src/router/guessed-lease';

const A = 'http://a:8000';
const B = 'http://b:8000';

function setup(fail = false) {
  const warnings: string[] = [];
  const released: (number | undefined)[] = [];
  // A shared store's (a guess is taken only there): no step answered in the call (FleetStore.acquireNow).
  const rt = { log: { warn: (m: string) => warnings.push(m) }, store: {} } as unknown as FleetRuntime;
  const release = async (status?: number) => {
    released.push(status);
    if (fail) throw new Error('store down');
    return undefined;
  };
  // On a shared store, releaseInCall is release's promise.
  const lease = {
    id: 'L1',
    lease: { url: A },
    rt,
    release,
    releaseInCall: release,
  } as unknown as LeaseHandle;
  const guess: GuessedLease = { held: { lease, state: 'loaded' } };
  return { rt, lease, guess, warnings, released };
}

afterEach(() => jest.restoreAllMocks());

describe('the guessed lease', () => {
  it('is used, not given back, when the decision goes to its replica', async () => {
    const { rt, lease, guess, released } = setup();
    const take = jest.spyOn(LeaseHandle, 'take');
    const got = await takeLease(rt, A, 'x', guess);
    expect(got).toEqual({ lease, state: 'loaded' });
    expect(guess.held).toBeUndefined();
    expect(released).toEqual([]);
    expect(take).not.toHaveBeenCalled();
  });

  it('is given back once, and a new lease taken, when the decision goes elsewhere', async () => {
    const { rt, guess, released } = setup();
    const fresh = { lease: { id: 'L2' } as unknown as LeaseHandle, state: undefined };
    const take = jest.spyOn(LeaseHandle, 'take').mockResolvedValue(fresh);
    expect(await takeLease(rt, B, 'x', guess)).toBe(fresh);
    expect(take).toHaveBeenCalledWith(rt, B, 'x');
    expect(guess.held).toBeUndefined();
    expect(released).toEqual([undefined]);
    expect(giveBack(rt, guess)).toBeUndefined(); // nothing held: nothing sent
    expect(released).toEqual([undefined]);
  });

  it('without a guess takes a new lease and gives nothing back', async () => {
    const { rt, released } = setup();
    const guess: GuessedLease = {};
    const fresh = { lease: { id: 'L2' } as unknown as LeaseHandle, state: undefined };
    jest.spyOn(LeaseHandle, 'take').mockResolvedValue(fresh);
    expect(await takeLease(rt, A, null, guess)).toBe(fresh);
    expect(giveBack(rt, guess)).toBeUndefined();
    expect(released).toEqual([]);
  });

  it('logs a failed release, answered later, and resolves all the same', async () => {
    const { rt, guess, warnings, released } = setup(true);
    const sent = giveBack(rt, guess);
    expect(guess.held).toBeUndefined();
    expect(released).toEqual([undefined]);
    await expect(sent).resolves.toBeUndefined();
    expect(warnings).toEqual(['could not give back lease L1: store down']);
  });

  it('gives back quietly a lease whose release ends in the call (no promise)', () => {
    const { rt, guess, lease, warnings, released } = setup();
    (lease as unknown as { releaseInCall: () => void }).releaseInCall = () => void released.push(undefined);
    expect(giveBack(rt, guess)).toBeUndefined();
    expect(released).toEqual([undefined]);
    expect(warnings).toEqual([]);
  });

  it('logs a release that fails in the call (its lease not open here), and throws nothing', () => {
    const { rt, guess, lease, warnings } = setup();
    (lease as unknown as { releaseInCall: () => never }).releaseInCall = () => {
      throw new Error('lease L1 is not open');
    };
    expect(giveBack(rt, guess)).toBeUndefined();
    expect(guess.held).toBeUndefined();
    expect(warnings).toEqual(['could not give back lease L1: lease L1 is not open']);
  });
});

describe('LastReplicas', () => {
  it('remembers the last replica per adapter, the base model apart', () => {
    const last = new LastReplicas();
    expect(last.get('x')).toBeUndefined();
    last.remember('x', A);
    last.remember(null, B);
    expect(last.get('x')).toBe(A);
    expect(last.get(null)).toBe(B);
    expect(last.get('')).toBe(B);
    last.remember('x', B);
    expect(last.get('x')).toBe(B);
  });

  it('keeps 4096 adapters, the least recently moved out first', () => {
    const last = new LastReplicas();
    last.remember('first', A);
    last.remember('again', A);
    for (let i = 0; i < 4094; i++) last.remember(`n${i}`, A);
    last.remember('again', A); // the same replica: its age unchanged
    last.remember('first', B); // moved: now the newest
    last.remember('new1', A);
    expect(last.get('first')).toBe(B);
    expect(last.get('again')).toBeUndefined();
    expect(last.get('n0')).toBe(A);
    last.remember('new2', A);
    expect(last.get('n0')).toBeUndefined();
    expect(last.get('n1')).toBe(A);
  });
});
