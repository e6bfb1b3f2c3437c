/**
 * Unit test of pluginserver/frames.ts: the end of a MessagePack value found from its headers
 * agrees with @msgpack/msgpack's decoder (the plugin server's codec), for values it encoded and
 * for random bytes.
 */
import { decode, encode } from '@msgpack/msgpack';
import fc from 'fast-check';
import { scanValue } from '../../pluginserver/frames';

const BIG = 1 << 30;

/** Values of every MessagePack type and length class (fix, 8, 16, 32 bit headers). */
const value = fc.letrec((tie) => ({
  leaf: fc.oneof(
    fc.constant(null),
    fc.boolean(),
    fc.integer(),
    fc.double(),
    fc.maxSafeInteger(),
    fc.string({ maxLength: 40 }),
    fc.integer({ min: 0, max: 70_000 }).map((n) => 'x'.repeat(n)),
    fc.uint8Array({ maxLength: 300 }),
    fc.integer({ min: 0, max: 70_000 }).map((n) => new Uint8Array(n)),
    fc.date({ noInvalidDate: true }), // the timestamp ext type
  ),
  node: fc.oneof(
    { depthSize: 'small' },
    tie('leaf'),
    fc.array(tie('node'), { maxLength: 6 }),
    fc.dictionary(fc.string({ maxLength: 8 }), tie('node'), { maxKeys: 6 }),
    fc.integer({ min: 16, max: 70_000 }).map((n) => new Array<number>(n).fill(1)),
  ),
})).node;

it('finds the end of every encoded value, and asks for more on every prefix', () => {
  fc.assert(
    fc.property(value, fc.uint8Array({ maxLength: 20 }), (v, after) => {
      const bytes = encode(v);
      const joined = Buffer.concat([bytes, after]);
      expect(scanValue(joined, 0, BIG)).toEqual({ kind: 'whole', end: bytes.length });
      for (const cut of [0, 1, bytes.length >> 1, bytes.length - 1]) {
        if (cut >= bytes.length) continue;
        const scan = scanValue(bytes.subarray(0, cut), 0, BIG);
        expect(scan.kind).toBe('partial');
        const need = (scan as { need: number }).need;
        expect(need).toBeGreaterThan(cut);
        expect(need).toBeLessThanOrEqual(bytes.length);
      }
      // A bound below its size refuses it.
      if (bytes.length > 1) expect(scanValue(bytes, 0, bytes.length - 1).kind).toBe('invalid');
    }),
    { seed: 33, numRuns: 150 },
  );
});

it('agrees with the decoder on random bytes', () => {
  fc.assert(
    fc.property(fc.uint8Array({ minLength: 1, maxLength: 64 }), (bytes) => {
      const scan = scanValue(bytes, 0, BIG);
      const decodeError = (b: Uint8Array) => {
        try {
          decode(b);
          return '';
        } catch (err) {
          return (err as Error).message;
        }
      };
      if (scan.kind === 'whole') {
        // Whole: the decoder neither runs short nor finds bytes over (it may refuse an ext's content).
        expect(decodeError(bytes.subarray(0, scan.end))).not.toMatch(/Insufficient data|Extra \d+ of/);
      } else expect(decodeError(bytes)).not.toBe('');
    }),
    { seed: 33, numRuns: 5000 },
  );
});

it('refuses a length announced past the bound before its bytes arrive', () => {
  expect(scanValue(new Uint8Array([0xc6, 0xff, 0xff, 0xff, 0xff]), 0, BIG)).toMatchObject({
    kind: 'invalid',
  });
  expect(scanValue(new Uint8Array([0xdd, 0x7f, 0xff, 0xff, 0xff]), 0, BIG)).toMatchObject({
    kind: 'invalid',
  });
  expect(scanValue(new Uint8Array([0xc1]), 0, BIG)).toMatchObject({ kind: 'invalid' });
  // Within the bound, a header alone asks for the whole payload at once.
  expect(scanValue(new Uint8Array([0xc6, 0, 1, 0, 0]), 0, BIG)).toEqual({ kind: 'partial', need: 5 + 65536 });
});
