/**
 * The scheduler's `wakeAfter` (a lease kept young during a load: src/adapters/call-keep.ts) draws
 * its tie-breaks from a stream of its own: adding such wakes leaves the order of every other timer
 * due at one instant, and so each seed found before, as it was.
 */
import { Scheduler } from '../../dst/scheduler';
import { seededRandom } from '../../src/random';

/** The order ten timers due at one instant fire in, with `wakes` wakes added among them. */
async function order(wakes: number): Promise<number[]> {
  const s = new Scheduler(seededRandom(7), seededRandom(8));
  const fired: number[] = [];
  for (let i = 0; i < 10; i++) {
    s.after(100, () => fired.push(i));
    for (let w = 0; w < wakes; w++) s.wakeAfter(100, () => {});
  }
  await s.run(
    200,
    () => {},
    () => false,
  );
  return fired;
}

it('wakes added among timers due at one instant leave their order as it was', async () => {
  const alone = await order(0);
  expect(alone).not.toEqual([...alone].sort((a, b) => a - b));
  expect(await order(3)).toEqual(alone);
});

it('with one stream (a wake drawn as any timer) the order changes', async () => {
  const s = new Scheduler(seededRandom(7));
  const fired: number[] = [];
  for (let i = 0; i < 10; i++) {
    s.after(100, () => fired.push(i));
    s.wakeAfter(100, () => {});
  }
  await s.run(
    200,
    () => {},
    () => false,
  );
  expect(fired).not.toEqual(await order(0));
});
