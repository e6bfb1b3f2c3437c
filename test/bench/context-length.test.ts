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

  it("the HTTP simulator answers 400 with v0.11's texts: prompt too long, or max_tokens too large (chat); the renderer's (completions)", async () => {
    // max_model_len above the KV capacity: vLLM would shrink or refuse it; the context is the capacity.
    const fleet = await SimFleet.start([{ maxModelLen: 131072, engine: { kvCapacityTokens: 4096 } }]);
    // 'x' x 4n is n tokens here, plus 4 for the one message.
    const ask = (promptTokens: number, extra: Record<string, unknown> = {}) =>
      post(fleet.urls[0]!, '/v1/chat/completions', {
        model: 'meta-llama/Llama-3.1-8B-Instruct',
        messages: [{ role: 'user', content: 'x'.repeat(4 * (promptTokens - 4)) }],
        ...extra,
      });
    try {
      // serving_engine.py `_validate_input` (vLLM v0.11.0, v0.11.2): the prompt alone first, refused
      // at the context itself (a completion needs one token), then prompt + max_tokens.
      for (const [promptTokens, extra] of [
        [5004, { max_tokens: 16 }],
        [4096, {}],
      ] as const) {
        const r = await ask(promptTokens, extra);
        expect(r.status).toBe(400);
        expect(r.json().error).toEqual({
          message: `This model's maximum context length is 4096 tokens. However, your request has ${promptTokens} input tokens. Please reduce the length of the input messages.`,
          type: 'BadRequestError',
          param: null,
          code: 400,
        });
      }
      for (const extra of [{ max_tokens: 200 }, { max_completion_tokens: 200 }]) {
        const r = await ask(4000, extra);
        expect(r.status).toBe(400);
        expect(r.json().error.message).toBe(
          "'max_tokens' or 'max_completion_tokens' is too large: 200. This model's maximum context length is 4096 tokens and your request has 4000 input tokens (200 > 4096 - 4000).",
        );
      }
      // /v1/completions goes through the renderer instead (vllm/entrypoints/renderer.py
      // `_create_tokens_prompt`, v0.11.0 and v0.11.2): each prompt against max_model_len - max_tokens
      // (`_build_render_config`, serving_completion.py), max_tokens defaulting to 16 (CompletionRequest).
      const legacy = await post(fleet.urls[0]!, '/v1/completions', {
        model: 'meta-llama/Llama-3.1-8B-Instruct',
        prompt: 'x'.repeat(4 * 4090),
      });
      expect(legacy.status).toBe(400);
      expect(legacy.json().error.message).toBe(
        "This model's maximum context length is 4080 tokens. However, your request has 4090 input tokens. Please reduce the length of the input messages.",
      );
      const fitsLegacy = await post(fleet.urls[0]!, '/v1/completions', {
        model: 'meta-llama/Llama-3.1-8B-Instruct',
        prompt: 'x'.repeat(4 * 4080),
      });
      expect(fitsLegacy.status).toBe(200);
      // A chat request without max_tokens is checked by its prompt alone; vLLM then caps the answer
      // at the context left (vllm/entrypoints/utils.py `get_max_tokens`): 4095 + 1 fits.
      const fits = await ask(4095);
      expect(fits.status).toBe(200);
      expect(fits.json().usage).toMatchObject({ prompt_tokens: 4095, completion_tokens: 1 });
    } finally {
      await fleet.stop();
    }
  });
});
