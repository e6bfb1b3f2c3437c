import { ReplicaEngine } from '../../sim/engine/engine';
import { countTokens } from '../../sim/http/openai';
import { arrivalBlocks, chatBody } from '../../sim/workload/body';
import { sharedPrefixWorkload } from '../../sim/workload/shared-prefix';
import { VirtualClock } from '../../src/clock';

describe('shared-prefix workload', () => {
  const arrivals = sharedPrefixWorkload(3000, 1);

  it("a conversation's turns repeat its earlier messages: each prompt opens with the one before and its answer", () => {
    const byConversation = new Map<number, typeof arrivals>();
    for (const a of arrivals) {
      const c = a.history!.conversation;
      byConversation.set(c, [...(byConversation.get(c) ?? []), a]);
    }
    const long = [...byConversation.values()].filter((turns) => turns.length >= 3);
    expect(long.length).toBeGreaterThan(50);
    for (const turns of long)
      for (let k = 1; k < turns.length; k++)
        expect(turns[k]!.promptTokens).toBeGreaterThan(
          turns[k - 1]!.promptTokens + turns[k - 1]!.outputTokens,
        );
  });

  it("the body is as many tokens as the simulator counts, and the engine's prefix cache serves a next turn's history", async () => {
    for (const a of arrivals.slice(0, 200)) {
      const body = JSON.parse(chatBody('m', a).toString()) as { messages: { content: string }[] };
      const tokens = countTokens(body.messages.map((m) => m.content).join('')) + 4 * body.messages.length;
      expect(Math.abs(tokens - a.promptTokens)).toBeLessThanOrEqual(body.messages.length);
    }
    const clock = new VirtualClock();
    const engine = new ReplicaEngine(clock);
    let cached = 0;
    let prompt = 0;
    arrivals.slice(0, 400).forEach((a, i) =>
      clock.after(a.at, () =>
        engine.submit({
          id: String(i),
          adapter: null,
          promptTokens: a.promptTokens,
          maxTokens: a.outputTokens,
          blocks: arrivalBlocks(a, null, `r${i}`),
          onFinish: (rec) => {
            cached += rec.cachedTokens ?? 0;
            prompt += rec.promptTokens;
          },
        }),
      ),
    );
    await clock.run(arrivals[399]!.at + 600_000);
    // System prompts and conversation histories: most prompt tokens come from the cache.
    expect(cached / prompt).toBeGreaterThan(0.5);
  });
});
