/**
 * RoomWants and Wanting alone (src/adapters/room-wants.ts): the survivors of `npm run
 * mutation:safety -- room-wants` (docs/reliability/mutation-testing.md). A request that waits for
 * room on other replicas than before wants room there, and no longer where it did: prefetching
 * leaves alone exactly the replicas a waiting request may load on.
 */
import { RoomWants, Wanting } from '../../src/adapters/room-wants';

const [U1, U2, U3] = ['http://r1:8000', 'http://r2:8000', 'http://r3:8000'];

describe('Wanting: a want moves with the replicas the request waits on', () => {
  it.each([
    ['more replicas', [U1], [U1, U2]],
    ['fewer replicas', [U1, U2], [U1]],
    ['others, as many', [U1, U2], [U1, U3]],
    ['the same, in another order', [U1, U2], [U2, U1]],
  ])('%s', (_case, before, after) => {
    const wants = new RoomWants();
    const w = new Wanting(wants, 'a', [U1, U2, U3]);
    w.on(before);
    w.on(after);
    for (const u of [U1, U2, U3]) expect(wants.on(u)).toEqual(after.includes(u) ? ['a'] : []);
    expect(wants.size).toBe(1);
    w.off();
    expect(wants.size).toBe(0);
  });

  it('the same replicas again keep the one want', () => {
    const wants = new RoomWants();
    const w = new Wanting(wants, 'a', [U1, U2]);
    w.on();
    w.on([U1, U2]);
    expect(wants.size).toBe(1);
    expect(wants.on(U2)).toEqual(['a']);
  });
});
