import { WorkModel } from '../../src/work/work-model';

const A = 'http://a:8000';

/**
 * The decode-time learning at its boundary: each request's first token is made by its prefill,
 * so the decode phase made generation tokens less one per finished request. With long answers
 * (300 tokens) leaving that out moves the figure by a third of a percent, inside any window a
 * test allows; with short answers it halves it.
 */
describe('decode time per output token, short answers', () => {
  it('takes one token a request off the generation tokens: 2-token answers, 40 ms for the second', () => {
    const w = new WorkModel({ prefillTokensPerS: 5000, decodeMsPerToken: 25 });
    // Each second 10 requests finish with 2 tokens each (one from the prefill, one decoded in 40 ms).
    for (let t = 0; t <= 40; t++)
      w.observeReplica(
        A,
        {
          waiting: 0,
          running: 4,
          finishedRequests: t * 10,
          generationTokens: t * 20,
          decodeSeconds: t * 0.4,
        },
        t * 1000,
      );
    // Without the correction: 400 ms over 20 tokens, 20 ms.
    expect(w.decodeMsPerToken()).toBeGreaterThan(38);
    expect(w.decodeMsPerToken()).toBeLessThan(42);
  });

  it('single-token answers leave nothing to decode: no sample, the prior stays', () => {
    const w = new WorkModel({ prefillTokensPerS: 5000, decodeMsPerToken: 25 });
    for (let t = 0; t <= 10; t++)
      w.observeReplica(
        A,
        {
          waiting: 0,
          running: 4,
          finishedRequests: t * 10,
          generationTokens: t * 10,
          decodeSeconds: t * 0.01,
        },
        t * 1000,
      );
    expect(w.decodeMsPerToken()).toBe(25);
  });
});
