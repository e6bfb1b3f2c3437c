import { SimFleet } from '../../sim/fleet';
import * as P from '../../bench/des/policies';
import { runPolicy, type Scenario } from '../../bench/des/run';
import { post } from '../helpers/http';

const scenario: Scenario = { replicas: 2, slots: 2, adapters: 4, alpha: 1, seed: 1, engine: {} };
// The engine's KV capacity (65,536 tokens) is the replica's context: vLLM will not start with a
// longer max_model_len (vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory, vLLM v0.11.0).
const arrivals = [
  { at: 0, promptTokens: 1000, outputTokens: 10 },
  { at: 10, promptTokens: 70_000, outputTokens: 300 },
  { at: 20, promptTokens: 2000, outputTokens: 10 },
];

describe('requests longer than a replica context', () => {
  it.each([P.loraRouter(), P.roundRobin])(
    'the simulation counts them as refused by the replica: %s',
    async (p) => {
      const r = await runPolicy(p, scenario, arrivals, ['adapter-0000', 'adapter-0001', 'adapter-0000']);
      expect(r).toMatchObject({ requests: 3, completed: 2, errors: 1, overContext: 1 });
      expect(r.sloAttainment).toBeCloseTo(2 / 3);
    },
  );

  it('the HTTP simulator answers 400 with vLLM text when the prompt exceeds its KV capacity', async () => {
    // max_model_len above the KV capacity: vLLM would shrink or refuse it; the context is the capacity.
    const fleet = await SimFleet.start([{ maxModelLen: 131072, engine: { kvCapacityTokens: 4096 } }]);
    try {
      const r = await post(fleet.urls[0]!, '/v1/chat/completions', {
        model: 'meta-llama/Llama-3.1-8B-Instruct',
        messages: [{ role: 'user', content: 'x'.repeat(4 * 5000) }],
        max_tokens: 16,
      });
      expect(r.status).toBe(400);
      expect(r.json().error.message).toBe(
        "This model's maximum context length is 4096 tokens. However, you requested 5020 tokens (5004 in the messages, 16 in the completion). Please reduce the length of the messages or completion.",
      );
    } finally {
      await fleet.stop();
    }
  });
});
