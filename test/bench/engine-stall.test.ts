import { loraRouter } from '../../bench/des/policies';
import { arrival, desSetup } from '../helpers/des-router';

/**
 * A load stops its replica's engine, and loads on one engine run one after another (the
 * simulator's engine as vLLM's: sim/engine/engine.ts `loadWeights`). A cold request must not be
 * placed behind another adapter's load when another replica can start its own load at once: it
 * would wait for both (issue 34: most interactive requests missing 2 s at 1 s loads did).
 */
describe('placement with a load under way (DES, real router)', () => {
  it("places a cold adapter away from a replica whose engine another adapter's load stops", async () => {
    const { clock, fleet, router } = desSetup(loraRouter('lora-router'), 2, 2, 1000);
    const ttft = new Map<string, { url: string; ms: number }>();
    const send = (adapter: string, at: number, outputTokens: number) =>
      clock.after(at - clock.now(), () => {
        void (async () => {
          const r = await router.route({ adapter, arrival: arrival(200, outputTokens) });
          if ('error' in r) throw new Error(`refused ${r.error}`);
          const rec = await fleet.submit(r.url, adapter, 200, outputTokens);
          if ('status' in rec) throw new Error('over context');
          ttft.set(`${adapter}@${at}`, { url: r.url, ms: rec.firstToken! - at });
          await router.done(r.url, r.token, { status: 200 });
        })();
      });
    // Two long requests of `c` keep one replica busy decoding; then `a` goes cold to the other.
    send('c', 0, 2000);
    send('c', 1500, 2000);
    send('a', 3000, 10);
    // 100 ms into a's load: b's load there would start only when a's ends.
    send('b', 3100, 10);
    await clock.run(10_000);
    router.stop();
    const a = ttft.get('a@3000')!;
    const b = ttft.get('b@3100')!;
    expect(b.url).not.toBe(a.url);
    expect(b.ms).toBeLessThan(1500);
  });
});
