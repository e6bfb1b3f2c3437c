import { VirtualClock } from '../../src/clock';
import { Signal } from '../../src/signal';

describe('Signal', () => {
  it('a wait that ends on its fallback leaves no wake-up behind, with no notify ever', async () => {
    const clock = new VirtualClock();
    const s = new Signal();
    // A request held 250 s, waking every 250 ms with nothing notifying (base-model traffic).
    for (let i = 0; i < 1000; i++) {
      const w = s.wait(clock, 250);
      expect(s.waiting).toBe(1);
      await clock.run(clock.now() + 250);
      await w;
    }
    expect(s.waiting).toBe(0);
    expect(clock.pending()).toBe(0);
  });

  it('notify wakes every wait at once and leaves neither wake-ups nor fallback timers', async () => {
    const clock = new VirtualClock();
    const s = new Signal();
    let woken = 0;
    const waits = Array.from({ length: 5 }, () => s.wait(clock, 250).then(() => woken++));
    expect(s.waiting).toBe(5);
    s.notify();
    await Promise.all(waits);
    expect(woken).toBe(5);
    expect(s.waiting).toBe(0);
    expect(clock.pending()).toBe(0);
    // A fallback that fires later finds nothing to do.
    await clock.run(1000);
    expect(woken).toBe(5);
  });
});
