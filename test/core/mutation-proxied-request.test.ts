/**
 * What the router hands Kong to proxy (src/router/proxied-request.ts), alone: the target of a
 * replica URL, and llama.cpp's `lora` field (every adapter listed with an explicit scale).
 */
import { RouterError } from '../../src/errors';
import { llamaBody, targetOf } from '../../src/router/proxied-request';

describe('targetOf', () => {
  it.each([
    ['http://r:8000', { host: 'r', port: 8000, https: false }],
    ['http://r', { host: 'r', port: 80, https: false }],
    ['https://r', { host: 'r', port: 443, https: true }],
    ['https://r:8443/v1', { host: 'r', port: 8443, https: true }],
    ['http://[::1]:8000', { host: '::1', port: 8000, https: false }],
    ['http://[fe80::1]', { host: 'fe80::1', port: 80, https: false }],
  ])('%s', (url, target) => {
    expect(targetOf(url)).toEqual(target);
  });
});

describe('llamaBody', () => {
  it('lists every adapter, 1 for the requested one and 0 for the others; the client’s own lora replaced', () => {
    const json = { model: 'a', lora: [{ id: 9, scale: 5 }] };
    expect(JSON.parse(llamaBody(json, 1, [0, 1, 2]))).toEqual({
      model: 'a',
      lora: [
        { id: 0, scale: 0 },
        { id: 1, scale: 1 },
        { id: 2, scale: 0 },
      ],
    });
    // Not (yet) in the replica's list: added.
    expect(JSON.parse(llamaBody(json, 3, [0])).lora).toEqual([
      { id: 0, scale: 0 },
      { id: 3, scale: 1 },
    ]);
    // The base model: all at 0.
    expect(JSON.parse(llamaBody(json, undefined, [0, 1])).lora).toEqual([
      { id: 0, scale: 0 },
      { id: 1, scale: 0 },
    ]);
  });

  it('a body it cannot serialise again: 400 invalid_json', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 20_000; i++) deep = [deep];
    try {
      llamaBody({ model: 'a', deep }, 0, [0]);
      throw new Error('serialised');
    } catch (err) {
      expect(err).toBeInstanceOf(RouterError);
      expect((err as RouterError).body().error).toMatchObject({
        code: 'invalid_json',
        message: 'The request body is nested too deeply.',
      });
    }
  });
});
