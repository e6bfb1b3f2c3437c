/**
 * The official `openai` npm client against the local stack when a burst of cold adapters
 * exceeds the cold-load budget: the router's 429 carries Retry-After, the SDK's own retries
 * wait it out, and the burst ends served.
 *
 * How the SDK honours it (openai 6.30.1, node_modules/openai/src/client.ts `retryRequest`,
 * `shouldRetry`): 408, 409, 429 and >= 500 are retried (unless `x-should-retry: false`);
 * the wait is `retry-after-ms` if it parses, else `retry-after` as seconds (or an HTTP date),
 * used as is, with no upper bound; only without either header does it back off
 * exponentially (0.5 s doubling to 8 s, minus up to 25 % jitter). openai 4.x (src/core.ts
 * `retryRequest`) honoured a wait only if 0 <= wait < 60 s; 6.x has no bound, so the router's
 * Retry-After of up to 60 is honoured as sent.
 *
 * The local stack runs no key-auth (docs/deployment.md), so no Kong consumer is identified and only the
 * fleet-wide `cold_loads_per_minute` applies. Its window is 60 s from the first load counted, on
 * the plugin server's clock. Waited out, it took this suite 62 s (CI's longest): the server's clock
 * is moved on instead (test/helpers/clock-jump.cjs, as a suspended VM sees time), so the burst
 * meets a window with seconds left and the SDK waits those, in real time.
 */
import { join } from 'node:path';
import OpenAI from 'openai';
import type { LocalStack } from '../../stack/stack';
import { startOpenAiStack, type Attempt } from './openai-stack';

// The resident adapter's request once got a 429 here (1 in 4 full-suite runs): one poll of its
// holder past lora-poller's timeout_ms marked the holder down, so the request went cold to another
// replica and the spent budget refused it. One timeout no longer marks a replica down
// (`unhealthy_timeouts`, test/core/poller.test.ts); the suite runs without a retry.

const BUDGET = 3;
/** How far the plugin server's clock is moved on: the budget's window has about 6 s left after. */
const JUMP_MS = 54_000;
let stack: LocalStack;
let client: OpenAI;
let attempts: Attempt[];

beforeAll(async () => {
  // kong.yml as a user writes it, with a fleet-wide budget of three adapter loads a minute.
  ({ stack, client, attempts } = await startOpenAiStack(
    (router) => {
      router.cold_loads_per_minute = BUDGET;
    },
    undefined,
    {
      args: ['--require', join(__dirname, '..', 'helpers', 'clock-jump.cjs')],
      env: { CLOCK_JUMP_MS: String(JUMP_MS) },
    },
  ));
});

afterAll(async () => {
  await stack?.stop();
});

const chat = (model: string, maxRetries: number) =>
  client.chat.completions.create(
    { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 },
    { maxRetries },
  );

it("retries the cold-load budget's 429 after its Retry-After, so a burst of cold requests ends served", async () => {
  // The budget's three loads, spent at the start of its window.
  const warm = ['sql-lora', 'chat-lora', 'summarize-lora'];
  expect((await Promise.all(warm.map((m) => chat(m, 0)))).map((r) => r.model)).toEqual(warm);
  expect(stack.loads()).toBe(BUDGET);

  // A fourth load, retries off: the SDK's RateLimitError, in OpenAI's error format.
  const err: unknown = await chat('translate-fr', 0).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(OpenAI.RateLimitError);
  expect(err).toMatchObject({
    status: 429,
    type: 'requests',
    code: 'rate_limit_exceeded',
    // No consumer locally: the fleet's budget refused it.
    message: expect.stringContaining('the fleet has started its allowed adapter loads'),
  });
  const retryAfter = (err as InstanceType<typeof OpenAI.RateLimitError>).headers?.get('retry-after');
  expect(retryAfter).toMatch(/^\d+$/);
  expect(Number(retryAfter)).toBeLessThanOrEqual(60);

  // Most of the window passes on the server's clock; a poll (every 500 ms in kong.yml) reads the
  // replicas again on the moved clock before the burst.
  process.kill(stack.pluginServerPid, 'SIGUSR2');
  await new Promise((r) => setTimeout(r, 1500));

  // A burst of as many cold adapters as the budget allows a minute, with a resident one.
  attempts.length = 0;
  const cold = ['translate-de', 'code-review', 'support-tone'];
  const done = await Promise.all([...cold, 'sql-lora'].map((m) => chat(m, 2)));
  expect(done.map((r) => r.model)).toEqual([...cold, 'sql-lora']);
  expect(stack.loads()).toBe(2 * BUDGET);

  // The resident adapter was never refused: one attempt, served.
  expect(attempts.filter((a) => a.model === 'sql-lora').map((a) => a.status)).toEqual([200]);
  for (const model of cold) {
    const mine = attempts.filter((a) => a.model === model);
    // Refused at once (the window still had seconds left), served on the retry.
    expect(mine.map((a) => a.status)).toEqual([429, 200]);
    const [no, yes] = mine as [(typeof mine)[0], (typeof mine)[0]];
    expect(no.retryAfter).toMatch(/^\d+$/);
    // The window's end on the moved clock: what is left of 60 s after the jump, not a fresh minute.
    expect(Number(no.retryAfter)).toBeLessThanOrEqual(60 - JUMP_MS / 1000);
    // The SDK waited at least Retry-After before its retry (timers may fire a ms early).
    expect(yes.sent - no.at).toBeGreaterThanOrEqual(Number(no.retryAfter) * 1000 - 5);
  }
}, 40_000);
