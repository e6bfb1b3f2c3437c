import { seededRandom } from '../../src/random';
import { draws, type Arrival } from './workload';
import { zipfSampler } from './zipf';

/**
 * Chat applications' traffic, where prompts share prefixes: conversations that each open with
 * one of a few system prompts and come back for several turns, each turn's prompt the system
 * prompt, the whole conversation so far and the new question. What a replica's prefix cache
 * serves (vLLM caches prompt prefixes by default), and what the router's prefix index can know.
 */
export const SHARED_PREFIX_SHAPE = {
  /** Conversations starting per second at the nominal rate; the benchmark rescales to its load. */
  conversationsPerS: 0.5,
  /** Turns: 1 + geometric with this mean of further turns, at most `maxTurns`. */
  moreTurns: 3,
  maxTurns: 12,
  /** Seconds between a turn and the next: exponential with this mean (reading, typing). */
  thinkS: 20,
  /** Distinct system prompts, drawn Zipf(1); their lengths uniform in [min, max] tokens. */
  systemPrompts: 6,
  systemTokens: { min: 400, max: 1600 },
  /** Share of conversations with a system prompt. */
  systemShare: 0.9,
  /** A user message's tokens: log-normal (median e^mu). */
  user: { mu: Math.log(120), sigma: 0.9, min: 8, max: 3000 },
  /** An answer's tokens: log-normal (median e^mu). */
  answer: { mu: Math.log(220), sigma: 0.7, min: 16, max: 1200 },
  /** A conversation ends once its next prompt and answer would pass this many tokens. */
  maxContext: 32_000,
};

/** Tokens the simulator counts per chat message on top of its text (sim/http/openai.ts). */
const PER_MESSAGE = 4;

export function sharedPrefixWorkload(count: number, seed: number): Arrival[] {
  const r = seededRandom(seed * 6151 + 29);
  const s = SHARED_PREFIX_SHAPE;
  const { exp, logNormal, uniform } = draws(r);
  const systemLength = Array.from({ length: s.systemPrompts }, () => uniform(s.systemTokens));
  const pickSystem = zipfSampler(s.systemPrompts, 1, r);
  const out: Arrival[] = [];
  let start = 0;
  // Enough conversations for `count` turns (each has at least one).
  for (let conversation = 0; out.length < count * 2 && conversation < count; conversation++) {
    start += exp(1 / s.conversationsPerS);
    const system = r() < s.systemShare ? pickSystem() : undefined;
    const systemTokens = system === undefined ? 0 : systemLength[system]!;
    let turns = 1;
    while (turns < s.maxTurns && r() < s.moreTurns / (1 + s.moreTurns)) turns++;
    const history: number[] = [];
    let at = start;
    for (let k = 0; k < turns; k++) {
      const user = logNormal(s.user);
      const answer = logNormal(s.answer);
      const messages = (system === undefined ? 0 : 1) + history.length + 1;
      const promptTokens = systemTokens + history.reduce((n, t) => n + t, 0) + user + PER_MESSAGE * messages;
      if (promptTokens + answer > s.maxContext) break;
      const a: Arrival = { at: at * 1000, promptTokens, outputTokens: answer };
      if (system !== undefined) a.prefix = { id: system, tokens: systemTokens };
      // Every turn names its conversation: the next one repeats this one's question and answer.
      a.history = { conversation, turns: [...history] };
      out.push(a);
      history.push(user, answer);
      at += exp(s.thinkS);
    }
  }
  out.sort((a, b) => a.at - b.at);
  const t0 = out[0]?.at ?? 0;
  return out.slice(0, count).map((a) => ({ ...a, at: a.at - t0 }));
}
