import { scanJson } from '../../src/router/body-json';
import { seededRandom } from '../../src/random';
import { parseBody } from '../../src/router/request';
import type { RouterError } from '../../src/errors';

/** A chat body of about `bytes` bytes: `before` and `after` around a long user message. */
function large(before: string, after = '', bytes = 256 * 1024): string {
  const head = `{${before}"messages":[{"role":"user","content":"`;
  const tail = `"}]${after}}`;
  return head + 'x'.repeat(bytes - head.length - tail.length) + tail;
}

const failure = (body: string) => {
  try {
    parseBody(Buffer.from(body), 'inference', 1 << 30);
  } catch (e) {
    return {
      status: (e as RouterError).status,
      code: (e as RouterError).code,
      message: (e as Error).message,
    };
  }
  return 'accepted';
};

describe('a large body is read without parsing its text whole', () => {
  it('does not hand the whole text to JSON.parse', () => {
    const body = Buffer.from(large('"model":"a",'));
    const parse = jest.spyOn(JSON, 'parse');
    try {
      expect(parseBody(body, 'inference', 1 << 30).model).toBe('a');
      const longest = Math.max(0, ...parse.mock.calls.map((c) => String(c[0]).length));
      expect(longest).toBeLessThan(1024);
    } finally {
      parse.mockRestore();
    }
  });
});

describe('a large body reads as JSON.parse reads it', () => {
  // Bodies where a scan for `"model"` or for top-level keys done naively would be wrong.
  const tricky: [string, string][] = [
    [
      '"model" inside a string before the real one',
      large('"note":"\\"model\\":\\"wrong\\"","model":"right",'),
    ],
    ['"model" as a value, then as a nested key', large('"a":"model","b":{"model":"wrong"},"model":"right",')],
    ['"model" in a nested object first', large('"extra":{"model":"wrong"},"model":"right",')],
    ['"model" in an array first', large('"tools":[{"model":"wrong"}],"model":"right",')],
    ['a duplicate key: the last wins', large('"model":"first",', ',"model":"last"')],
    ['escaped quotes and backslashes in the model', large('"model":"a\\"b\\\\",')],
    ['unicode escapes in a key and the model', large('"mod\\u0065l":"\\u00e9-lora\\ud83d\\ude00",')],
    ['raw UTF-8 in the long content', large('"model":"a",').replace('xxxx', 'é😀\u2028ü')],
    ['escapes in the long content', large('"model":"a",').replace('xxxx', '\\n\\t\\"\\\\\\/\\u0041')],
    [
      'every kind of value',
      large('"model":"a","n":[-0,0.5,1e3,-2E-2,12345678901234567890,true,false,null,{},[]],'),
    ],
    ['whitespace everywhere', large(' \n\t"model" \r: "a" ,\n').replace(/}$/, ' \n}\n ')],
    ['a key named __proto__', large('"__proto__":{"model":"wrong"},"model":"a",')],
    ['keys that look like indexes', large('"2":1,"1":2,"model":"a",')],
    [
      'nesting deeper than the scan goes',
      large(`"model":"a","deep":${'['.repeat(1000)}${']'.repeat(1000)},`),
    ],
  ];
  it.each(tricky)('%s', (name, body) => {
    const parsed = parseBody(Buffer.from(body), 'inference', 1 << 30);
    expect(parsed.json).toStrictEqual(JSON.parse(body));
    expect(Object.keys(parsed.json!)).toEqual(Object.keys(JSON.parse(body)));
    expect(parsed.model).toBe(JSON.parse(body).model);
    // Read by the scan itself, not left to JSON.parse, but for escapes and the two unusual ones.
    const unusual = /__proto__|deeper/.test(name) || body.includes('\\');
    expect(scanJson(Buffer.from(body)) === undefined).toBe(unusual);
  });

  it('at any alignment of the bytes in their buffer (msgpack hands over a view), at any length', () => {
    for (const text of ['1', '[]', '{}', '"ab"', ' 12 ', 'true']) {
      const view = new Uint8Array(new ArrayBuffer(16), 1, text.length);
      view.set(Buffer.from(text));
      expect(scanJson(view)).toStrictEqual(JSON.parse(text));
    }
    const body = Buffer.from(large('"model":"a",').replace('xxxxxxx', 'x","y":"é😀z'));
    for (let offset = 0; offset < 8; offset++) {
      const view = new Uint8Array(new ArrayBuffer(body.length + 8), offset, body.length);
      view.set(body);
      expect(scanJson(view)).toStrictEqual(JSON.parse(body.toString()));
    }
  });

  it('accepts nothing JSON.parse refuses, and reads what it accepts as JSON.parse does (mutated bodies)', () => {
    const random = seededRandom(34);
    const base =
      '{"model":"a/b","n":[-0.5e+3,0,true,false,null],"messages":[{"role":"user","content":"' +
      'abc dé😀 '.repeat(30) +
      '"}],"o":{"k":{}},"e":[]}';
    const pieces = [
      '"',
      '\\',
      ',',
      ':',
      '{',
      '}',
      '[',
      ']',
      ' ',
      '0',
      '-',
      '.',
      'e',
      'u',
      '\u0001',
      'é',
      'x',
    ];
    let accepted = 0;
    for (let k = 0; k < 3000; k++) {
      let text = base;
      for (let m = 1 + Math.floor(random() * 3); m > 0; m--) {
        const at = Math.floor(random() * text.length);
        const piece = pieces[Math.floor(random() * pieces.length)]!;
        text =
          random() < 0.5
            ? text.slice(0, at) + piece + text.slice(at + 1)
            : text.slice(0, at) + piece + text.slice(at);
      }
      const bytes = Buffer.from(text);
      let expected: unknown;
      try {
        expected = JSON.parse(bytes.toString('utf8'));
      } catch {
        expected = undefined;
      }
      const got = scanJson(bytes);
      if (got !== undefined) {
        accepted++;
        expect(got).toStrictEqual(expected);
      }
    }
    // Most mutations break the JSON; some must be accepted, or this tests nothing.
    expect(accepted).toBeGreaterThan(100);
  });

  it('keeps invalid UTF-8 as the decoder replaces it', () => {
    const text = large('"model":"a",');
    const bytes = Buffer.from(text);
    const at = text.indexOf('xxxx');
    bytes[at] = 0xff;
    bytes[at + 2] = 0xe2;
    const parsed = parseBody(bytes, 'inference', 1 << 30);
    expect(parsed.json).toStrictEqual(JSON.parse(bytes.toString('utf8')));
  });

  // Invalid JSON gets the same OpenAI-format error as before.
  const invalid: [string, string][] = [
    ['a raw control character in the long content', large('"model":"a",').replace('xxxx', 'x\u0001x')],
    ['a raw newline in a key', large('"mo\ndel":"a",')],
    ['a bad escape', large('"model":"a",').replace('xxxx', '\\x')],
    ['a short unicode escape', large('"model":"a",').replace('xxxx', '\\u12')],
    ['a trailing comma', large('"model":"a",', ',')],
    ['a leading zero', large('"model":"a","n":01,')],
    ['a bare dot', large('"model":"a","n":1.,')],
    ['a single-quoted string', large("'model':'a',")],
    ['garbage after the object', large('"model":"a",') + 'x'],
    ['a second object after the first', large('"model":"a",') + '{}'],
    ['a byte-order mark', '\ufeff' + large('"model":"a",')],
    ['an unterminated string', large('"model":"a",').slice(0, -4)],
    ['an array at the top', `[${large('"model":"a",')}]`],
  ];
  it.each(invalid)('%s', (_, body) => {
    const before = ((): unknown => {
      try {
        JSON.parse(body);
      } catch (e) {
        return e instanceof RangeError ? 'it is nested too deeply' : 'it is not valid JSON';
      }
      return 'parsed';
    })();
    if (before !== 'parsed') expect(scanJson(Buffer.from(body))).toBeUndefined();
    const got = failure(body);
    expect(got).not.toBe('accepted');
    if (before !== 'parsed') expect((got as { message: string }).message).toContain(before as string);
    expect(got).toMatchObject({ status: 400, code: 'invalid_json' });
  });
});
