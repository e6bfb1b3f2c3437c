/**
 * What the router hands Kong to proxy (src/router/proxied-request.ts), alone: the target of a
 * replica URL, and llama.cpp's `lora` field (every adapter listed with an explicit scale), added to
 * the client's bytes (src/router/body-member.ts).
 */
import { CATALOGUE, RouterError } from '../../src/errors';
import { nestedDeeperThan, withLastMember } from '../../src/router/body-member';
import { LLAMA_MAX_DEPTH, llamaBody, targetOf } from '../../src/router/proxied-request';

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
  /** llamaBody on a body given as text, as parseBody hands it over. */
  const llama = (text: string, llamaId: number | undefined, ids: number[]) =>
    llamaBody(JSON.parse(text) as Record<string, unknown>, text, llamaId, ids);

  it('lists every adapter, 1 for the requested one and 0 for the others; the client’s own lora overridden', () => {
    const sent = '{"model":"a","lora":[{"id":9,"scale":5}]}';
    const body = llama(sent, 1, [0, 1, 2]);
    expect(body).toBe(
      '{"model":"a","lora":[{"id":9,"scale":5}],"lora":[{"id":0,"scale":0},{"id":1,"scale":1},{"id":2,"scale":0}]}',
    );
    // Read as llama.cpp's parser reads it: the last lora.
    expect(JSON.parse(body)).toEqual({
      model: 'a',
      lora: [
        { id: 0, scale: 0 },
        { id: 1, scale: 1 },
        { id: 2, scale: 0 },
      ],
    });
    // Not (yet) in the replica's list: added.
    expect(JSON.parse(llama(sent, 3, [0])).lora).toEqual([
      { id: 0, scale: 0 },
      { id: 3, scale: 1 },
    ]);
    // The base model: all at 0.
    expect(JSON.parse(llama(sent, undefined, [0, 1])).lora).toEqual([
      { id: 0, scale: 0 },
      { id: 1, scale: 0 },
    ]);
  });

  it('keeps the client’s bytes: numbers, key order, escapes and layout', () => {
    const sent =
      ' {"seed": 12345678901234567890, "temperature": 1.0, "logit_bias": {"50256": -100, "123": 1e0}, "s": "\\u00e9\\"}"}\n';
    expect(llama(sent, 0, [0])).toBe(sent.trimEnd().slice(0, -1) + ',"lora":[{"id":0,"scale":1}]}\n');
    expect(llama('{}', undefined, [])).toBe('{"lora":[]}');
  });

  it(`a body nested more than ${LLAMA_MAX_DEPTH} deep: 400 invalid_json, however deep V8 could go`, () => {
    const nested = (depth: number) => `{"model":"a","x":${'['.repeat(depth - 1)}${']'.repeat(depth - 1)}}`;
    expect(JSON.parse(llama(nested(LLAMA_MAX_DEPTH), 0, [0])).lora).toEqual([{ id: 0, scale: 1 }]);
    for (const depth of [LLAMA_MAX_DEPTH + 1, 20_000]) {
      try {
        llama(nested(depth), 0, [0]);
        throw new Error(`sent ${depth} deep`);
      } catch (err) {
        expect(err).toBeInstanceOf(RouterError);
        expect((err as RouterError).body().error).toMatchObject({
          code: 'invalid_json',
          message: 'The request body is nested too deeply.',
        });
      }
    }
  });
});

describe('invalid_json in docs/errors.md', () => {
  it('names the depth llamaBody refuses past', () => {
    expect(CATALOGUE.invalid_json.when).toContain(`${LLAMA_MAX_DEPTH.toLocaleString('en-US')} levels`);
  });
});

describe('nestedDeeperThan', () => {
  it('counts brackets outside strings only', () => {
    expect(nestedDeeperThan('[[[]]]', 3)).toBe(false);
    expect(nestedDeeperThan('[[[]]]', 2)).toBe(true);
    expect(nestedDeeperThan('{"a":{"b":[1]}}', 3)).toBe(false);
    expect(nestedDeeperThan('{"a":{"b":[{}]}}', 3)).toBe(true);
    // Closed levels do not add up.
    expect(nestedDeeperThan('[[],[],[],[]]', 2)).toBe(false);
    // Brackets in strings, after an escaped quote and an escaped backslash, are text.
    expect(nestedDeeperThan(`["[[[[", "\\"[[[[", "\\\\", []]`, 2)).toBe(false);
    expect(nestedDeeperThan(`["\\\\", [[]]]`, 2)).toBe(true);
  });
});

describe('withLastMember', () => {
  it('adds the member before the closing brace, with a comma only after another member', () => {
    expect(withLastMember({ a: 1 }, '{"a":1} \n', 'p', '2')).toBe('{"a":1,"p":2} \n');
    expect(withLastMember({}, '{ }', 'p', '2')).toBe('{ "p":2}');
    expect(withLastMember({}, '{}', 'a"b', '[]')).toBe('{"a\\"b":[]}');
  });
});
