/**
 * The simulated vLLM's completion answers against vLLM's serving code, read at v0.11.0, v0.11.2 and
 * v0.19.0 (vllm/entrypoints/openai/serving_completion.py and serving_chat.py; at v0.19.0
 * completion/serving.py and chat_completion/serving.py): the request id, a batch of prompts, the
 * streamed usage chunk (docs/replica-apis.md, "Citations checked at a tag").
 */
import { SimFleet } from '../../sim/fleet';
import { call, chat, post, sseEvents } from '../helpers/http';

const BASE = 'meta-llama/Llama-3.1-8B-Instruct';

describe('simulated vLLM completions, as vLLM serves them', () => {
  let fleet: SimFleet;
  let url: string;

  beforeAll(async () => {
    fleet = await SimFleet.start([{ timeScale: 20, maxModelLen: 8192, engine: { decodeMsPerStep: 20 } }]);
    url = fleet.urls[0]!;
  });
  afterAll(() => fleet.stop());

  it("streams /v1/completions' usage chunk as a text_completion, with no choices", async () => {
    // CompletionStreamResponse (object "text_completion") carries the final usage in every tag read.
    const r = await post(url, '/v1/completions', {
      model: BASE,
      prompt: 'x',
      max_tokens: 2,
      stream: true,
      stream_options: { include_usage: true },
    });
    const events = sseEvents(r.text);
    expect(events.at(-1)).toBe('[DONE]');
    const last = JSON.parse(events.at(-2)!);
    expect(last).toMatchObject({ object: 'text_completion', choices: [], usage: { completion_tokens: 2 } });
  });

  it('checks each prompt of a batch against the context on its own, and answers one choice per prompt', async () => {
    // Three ~3,000-token prompts: 9,000 together, past 8,192, yet each fits with its 100 tokens
    // (create_completion: one engine request and one get_max_tokens per prompt).
    const prompts = ['a', 'b', 'c'].map((c) => c.repeat(12_000));
    const r = await post(url, '/v1/completions', { model: BASE, prompt: prompts, max_tokens: 100 });
    expect(r.status).toBe(200);
    const b = r.json();
    expect(b.choices.map((c: { index: number }) => c.index)).toEqual([0, 1, 2]);
    expect(b.usage).toEqual({ prompt_tokens: 9000, completion_tokens: 300, total_tokens: 9300 });
    // One prompt past the context is refused, by its own length.
    const long = await post(url, '/v1/completions', {
      model: BASE,
      prompt: ['a', 'b'.repeat(33_000)],
      max_tokens: 100,
    });
    expect(long.status).toBe(400);
    expect(long.json().error.message).toMatch(/your request has 8250 input tokens/);
  });

  it('takes a batch of token-id prompts', async () => {
    const r = await post(url, '/v1/completions', {
      model: BASE,
      prompt: [
        [1, 2, 3],
        [4, 5],
      ],
      max_tokens: 2,
    });
    expect(r.status).toBe(200);
    expect(r.json().choices).toHaveLength(2);
    expect(r.json().usage).toMatchObject({ prompt_tokens: 5, completion_tokens: 4 });
  });

  it("streams a batch's choices by their index, the usage summed over the prompts", async () => {
    const r = await post(url, '/v1/completions', {
      model: BASE,
      prompt: ['first', 'second'],
      max_tokens: 2,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = sseEvents(r.text)
      .slice(0, -1)
      .map((e) => JSON.parse(e));
    const byIndex = [0, 1].map(
      (i) => chunks.filter((c) => c.choices.length && c.choices[0].index === i).length,
    );
    expect(byIndex).toEqual([2, 2]);
    expect(chunks.at(-1).usage).toMatchObject({ prompt_tokens: 4, completion_tokens: 4 });
  });

  it("names a completion by the client's X-Request-Id when sent, else by a random id", async () => {
    // `_base_request_id`: the header, else the body's request_id (a random_uuid by default).
    const sent = await call(url, '/v1/chat/completions', {
      body: chat(BASE, 1),
      headers: { 'x-request-id': 'trace-7' },
    });
    expect(sent.json().id).toBe('chatcmpl-trace-7');
    const own = await post(url, '/v1/completions', {
      model: BASE,
      prompt: 'x',
      max_tokens: 1,
      request_id: 'r1',
    });
    expect(own.json().id).toBe('cmpl-r1');
    const random = await post(url, '/v1/completions', { model: BASE, prompt: 'x', max_tokens: 1 });
    expect(random.json().id).toMatch(/^cmpl-[0-9a-f]{32}$/);
  });
});
