import { WorkModel } from '../../src/work/work-model';

const A = 'http://a:8000';

/**
 * The decode-time learning at its boundary: each request's first token is made by its prefill,
 * so the decode phase made generation tokens less one per finished request. With long answers
 * (300 tokens) leaving that out moves the figure by a third of a percent, inside any window a
 * test allows; with short answers it halves it.
 */
describe('decode time per output token, short answers', () => {
  /** For `seconds` s, `finished` requests end each second with `tokens` tokens each, `decodeS` s of decode in all. */
  function learn(seconds: number, each: { finished: number; tokens: number; decodeS: number }): WorkModel {
    const w = new WorkModel({ prefillTokensPerS: 5000, decodeMsPerToken: 25 });
    for (let t = 0; t <= seconds; t++) {
      const f = { finishedRequests: t * each.finished, generationTokens: t * each.finished * each.tokens };
      w.observeReplica(A, { waiting: 0, running: 4, ...f, decodeSeconds: t * each.decodeS }, t * 1000);
    }
    return w;
  }

  it('takes one token a request off the generation tokens: 2-token answers, 40 ms for the second', () => {
    // 10 requests a second, one token from the prefill and one decoded in 40 ms each.
    const w = learn(40, { finished: 10, tokens: 2, decodeS: 0.4 });
    // Without the correction: 400 ms over 20 tokens, 20 ms.
    expect(w.decodeMsPerToken()).toBeGreaterThan(38);
    expect(w.decodeMsPerToken()).toBeLessThan(42);
  });

  it('single-token answers leave nothing to decode: no sample, the prior stays', () => {
    expect(learn(10, { finished: 10, tokens: 1, decodeS: 0.01 }).decodeMsPerToken()).toBe(25);
  });
});
