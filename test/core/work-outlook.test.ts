import { seededRandom } from '../../src/random';
import { WorkModel } from '../../src/work/work-model';

/**
 * `WorkModel.outlook` reads in one lookup what a prediction used to read with six calls: on two
 * models driven alike, it must give exactly the figures those calls give, in the order
 * predictions made them (each call may advance the replica's drained prefill).
 */
describe('WorkModel.outlook', () => {
  it('gives the figures of kvWaitMs, slotWaitMs, prefillRate, queuedPrefill, prefillStepMs and creditsPrefix', () => {
    const urls = ['http://a:8000', 'http://b:8000', 'http://c:8000', 'http://never:8000'];
    const models = [new WorkModel({ prefillTokensPerS: 5000 }), new WorkModel({ prefillTokensPerS: 5000 })];
    const rands = [seededRandom(7), seededRandom(7)];
    const open: string[][] = [[], []];
    const sums = [0, 0];
    let compared = 0;
    for (let step = 0, now = 1000; step < 3000; step++) {
      const figures = models.map((w, m) => {
        const rand = rands[m]!;
        const int = (n: number) => Math.floor(rand() * n);
        const url = urls[int(3)]!;
        const t = now + int(50);
        if (step === 0) w.setKvCapacity(urls[1]!, 20_000);
        const op = rand();
        if (op < 0.45) {
          const id = `r${step}`;
          w.admit({
            id,
            url,
            promptTokens: 100 + int(4000),
            maxTokens: 50 + int(400),
            at: t,
            cachedTokens: int(200),
          });
          open[m]!.push(id);
        } else if (op < 0.8 && open[m]!.length > 0) {
          const [id] = open[m]!.splice(int(open[m]!.length), 1);
          w.release(id!, t, rand() < 0.7);
        } else if (op < 0.9) {
          sums[m]! += 1000 + int(5000);
          w.observeReplica(
            url,
            {
              waiting: int(4),
              running: int(8),
              kvUsage: rand(),
              promptTokensTotal: sums[m]!,
              firstTokensTotal: 1 + step,
              finishedPromptTokens: sums[m]!,
              prefillSeconds: step / 10,
              ...(url === urls[2] ? { finishedComputedTokens: sums[m]! / 2, finishedRequests: step } : {}),
            },
            t,
          );
        }
        const need = 500 + int(20_000);
        const at = urls[int(4)]!;
        if (m === 0) {
          const o = w.outlook(at, t, need);
          return [o.waitMs, o.rate, o.queuedTokens, o.stepMs, o.creditsPrefix];
        }
        const waitMs = Math.max(w.kvWaitMs(at, t, need), w.slotWaitMs(at, t));
        const rate = w.prefillRate(at);
        return [waitMs, rate, w.queuedPrefill(at, t), w.prefillStepMs(at), w.creditsPrefix(at)];
      });
      expect(figures[0]).toEqual(figures[1]);
      if ((figures[0]![0] as number) > 0) compared++;
      now += 20;
    }
    // Waits were read, not only zeros.
    expect(compared).toBeGreaterThan(100);
  });
});
