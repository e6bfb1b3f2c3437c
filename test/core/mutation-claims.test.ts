/**
 * Unit test of PlacementClaims (src/adapters/claims.ts, one module), written against the survivors
 * of `npm run mutation:safety -- claims` (docs/reliability/mutation-testing.md): a claim counts
 * each decision that made it and lasts until the last one ends; the overlay shows a claim as a
 * slot spoken for (and the requested adapter as loading there) only while the store does not
 * show it yet, and not once another router's placement of the adapter is in the store.
 */
import { PlacedElsewhere, PlacementClaims } from '../../src/adapters/claims';
import { VirtualClock } from '../../src/clock';
import type { ReplicaView, ResidentAdapter } from '../../src/fleet/types';
import { view } from './helpers';

const R1 = 'http://r1:8000';
const R2 = 'http://r2:8000';
const T0 = 100_000;

async function claimsAt() {
  const clock = new VirtualClock();
  await clock.run(T0);
  return new PlacementClaims(clock);
}

const resident = (name: string): ResidentAdapter => ({
  name,
  state: 'loaded',
  since: 0,
  lastUsed: 0,
  inFlight: 0,
});

/** Fresh views of R1 and R2 (`over` for each), overlaid for a request of `adapter`. */
function overlaid(
  c: PlacementClaims,
  adapter: string,
  over: Partial<ReplicaView>[] = [{}, {}],
): ReplicaView[] {
  const vs = [view(R1, over[0]), view(R2, over[1])];
  c.overlay(vs, adapter);
  return vs;
}

describe('PlacementClaims: counting', () => {
  it('a claim made by two decisions lasts until both end; ending one never ends another', async () => {
    const c = await claimsAt();
    c.claim(R1, 'x');
    c.claim(R1, 'x');
    c.claim(R1, 'y');
    c.unclaim(R1, 'x');
    expect(overlaid(c, 'x')[0]!.adapter?.claimed).toBe(true);
    c.unclaim(R1, 'x');
    expect(overlaid(c, 'x')[0]!.adapter).toBeUndefined();
    // `y` still claimed on R1: a slot spoken for (with residents known).
    expect(overlaid(c, 'x', [{ residents: [] }, {}])[0]!.residentCount).toBe(1);
    // Ending what was never claimed (here, or on a replica with no claims) changes nothing.
    c.unclaim(R1, 'z');
    c.unclaim(R2, 'y');
    expect(overlaid(c, 'y')[0]!.adapter?.claimed).toBe(true);
    c.unclaim(R1, 'y');
    expect(overlaid(c, 'y')[0]!.adapter).toBeUndefined();
    // Nothing left: a new claim on the same replica counts from one again.
    c.claim(R1, 'y');
    c.unclaim(R1, 'y');
    expect(overlaid(c, 'y')[0]!.adapter).toBeUndefined();
  });
});

describe('PlacementClaims: the overlay', () => {
  it('shows the requested adapter as loading where it is claimed, now, and takes a slot there', async () => {
    const c = await claimsAt();
    c.claim(R2, 'x');
    const [v1, v2] = overlaid(c, 'x');
    expect(v1!.adapter).toBeUndefined();
    expect(v1!.residentCount).toBe(0);
    expect(v2!.adapter).toEqual({ state: 'loading', lastUsed: T0, inFlight: 0, claimed: true });
    expect(v2!.residentCount).toBe(1);
  });

  it('adds nothing where the store shows the claim already', async () => {
    const c = await claimsAt();
    c.claim(R1, 'x');
    c.claim(R1, 'y');
    const inStore = { state: 'loading' as const, lastUsed: 5, inFlight: 0 };
    const [v] = overlaid(c, 'x', [{ adapter: inStore, residents: [resident('y')], residentCount: 2 }, {}]);
    expect(v!.adapter).toBe(inStore);
    expect(v!.residentCount).toBe(2);
  });

  it('counts another adapter’s claim as a slot only where the residents are known and lack it', async () => {
    const c = await claimsAt();
    c.claim(R1, 'y');
    c.claim(R2, 'y');
    const [known, unknown] = overlaid(c, 'x', [{ residents: [resident('a')], residentCount: 1 }, {}]);
    expect(known!.residentCount).toBe(2);
    expect(known!.adapter).toBeUndefined();
    // Without the residents list it cannot tell whether the store has it: nothing added.
    expect(unknown!.residentCount).toBe(0);
    expect(unknown!.adapter).toBeUndefined();
    // Resident already (the store counts it), the requested adapter nowhere: nothing added.
    const [counted] = overlaid(c, 'x', [{ residents: [resident('y')], residentCount: 1 }, {}]);
    expect(counted!.residentCount).toBe(1);
  });

  it('does not show its own claim once another router’s placement of the adapter is in the store', async () => {
    const c = await claimsAt();
    c.claim(R1, 'x');
    c.claim(R1, 'y');
    const placed = { state: 'loading' as const, lastUsed: 0, inFlight: 0, placed: true };
    const [v1, v2] = overlaid(c, 'x', [{ residents: [] }, { adapter: placed }]);
    // The loser steps back: no claimed holder on R1, and no slot for it; `y`'s slot is still spoken for.
    expect(v1!.adapter).toBeUndefined();
    expect(v1!.residentCount).toBe(1);
    expect(v2!.adapter).toBe(placed);
  });

  it('leaves the views alone when nothing is claimed', async () => {
    const c = await claimsAt();
    const before = [view(R1), view(R2)];
    expect(overlaid(c, 'x')).toEqual(before);
  });
});

it('PlacedElsewhere names the adapter and the replica it was placed on', () => {
  const e = new PlacedElsewhere('x', R2);
  expect([e.adapter, e.url]).toEqual(['x', R2]);
  expect(e.message).toBe(`adapter 'x' was placed on ${R2} while this load waited for room`);
});
