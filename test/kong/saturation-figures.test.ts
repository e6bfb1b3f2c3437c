/**
 * The saturation a replica shows on the placement page (status JSON) and in
 * `lora_router_replica_saturation` is the one its configuration decides with: with
 * `saturation_mode: predicted`, the predicted wait, not the waiting count.
 */
import { waitFor } from '../../harness/wait';
import type { KongDriver } from '../../harness/kong/driver';
import { chatBody, onDemand, startWorld, usePluginServer, vllm } from './world';

let driver: KongDriver;
usePluginServer((_s, d) => {
  driver = d;
});

describe('saturation on the page and in the metrics', () => {
  let w: Awaited<ReturnType<typeof startWorld>> | undefined;
  afterEach(async () => {
    await w?.stop();
    w = undefined;
  });

  for (const mode of ['predicted', 'count'] as const) {
    it(`follows saturation_mode: ${mode}`, async () => {
      // One sequence at a time, time 10x: prefill at 20k tokens a second until measured.
      w = await startWorld(
        driver,
        [vllm({ maxModelLen: 200_000, engine: { maxNumSeqs: 1, kvCapacityTokens: 1_000_000 } })],
        (u) =>
          onDemand(u, {
            saturation_mode: mode,
            target_waiting_per_replica: 4,
            prefill_tokens_per_second: 20_000,
          }),
      );
      const replica = w.fleet.replicas[0]!;
      const send = (tokens: number, maxTokens: number) =>
        w!.service.handle({
          path: '/v1/chat/completions',
          headers: { 'content-type': 'application/json' },
          body: chatBody('hot', tokens, maxTokens),
        });
      // A long decode holds the one sequence; two 50k-token prompts wait behind it: 2 of 4
      // waiting (0.5 by count), about 5 s of prefill ahead of the next request (predicted).
      const jam = [send(10, 2000)];
      await waitFor(() => replica.engine.stats().running === 1);
      jam.push(send(50_000, 10), send(50_000, 10));
      await waitFor(() => replica.engine.stats().waiting === 2);
      const url = w.fleet.urls[0]!;
      const shown = async () => {
        const s = await w!.statusJson();
        const metrics = (await w!.status.handle({ method: 'GET', path: '/lora/metrics' })).body.toString();
        const line = metrics
          .split('\n')
          .find((l) => l.startsWith(`lora_router_replica_saturation{replica="${url}"}`));
        const mine = s.replicas.find((r: { url: string }) => r.url === url);
        return {
          page: mine.saturation as number,
          mode: mine.saturationMode as string,
          metric: Number(line?.split(' ')[1]),
        };
      };
      if (mode === 'count') {
        await waitFor(async () => (await shown()).page === 0.5, 5000, 'the poll saw 2 waiting');
        expect(await shown()).toEqual({ page: 0.5, mode: 'count', metric: 0.5 });
      } else {
        const { page, mode: shownMode, metric } = await shown();
        expect(shownMode).toBe('predicted');
        // Read a moment apart, as the queue drains: both past 1.
        expect(page).toBeGreaterThanOrEqual(1);
        expect(metric).toBeGreaterThanOrEqual(1);
      }
      await Promise.all(jam);
    }, 60_000);
  }
});
