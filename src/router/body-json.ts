import { isAscii } from 'node:buffer';

/**
 * A large request body's JSON, read from its bytes without decoding the whole text and handing
 * it to JSON.parse: at 1 MB that took about 2 ms of the access phase (UTF-8 decoding, then
 * JSON.parse scanning every character of the prompt again). Here the long strings (the prompt)
 * are scanned a word of 4 bytes at a time and copied out as text once; everything else is built
 * as JSON.parse builds it.
 *
 * Strict by construction: anything it does not fully check (an escape in a string, a `__proto__`
 * key, nesting past `MAX_DEPTH`) or that is not valid JSON gives `undefined`, and the caller
 * parses the text whole with JSON.parse as before, so an invalid body gets JSON.parse's verdict
 * and the same answer. What it accepts is JSON.parse's value (test/core/body-scan.test.ts).
 */

/** Below this size JSON.parse is as fast (100 KB: about 90 µs either way; 256 KB: 0.7-0.8 ms, 0.47 here). */
export const SCANNED_BODY_BYTES = 128 * 1024;

/** Deeper nesting is left to JSON.parse (which does not recurse). */
const MAX_DEPTH = 128;

/** From this length a string's text is checked for ASCII first (a native check, SIMD). */
const ASCII_CHECK_FROM = 1024;

/** Below this length a string is scanned byte by byte. */
const WORDWISE_FROM = 64;

/** Thrown inside the scan for anything it leaves to JSON.parse. */
class Unscanned extends Error {}
const UNSCANNED = new Unscanned();

/** The body's JSON value, or `undefined` when JSON.parse must decide (invalid, or unusual). */
export function scanJson(bytes: Uint8Array): unknown {
  try {
    const s = new Scan(bytes);
    s.space();
    const value = s.value(0);
    s.space();
    return s.at === bytes.length ? value : undefined;
  } catch (err) {
    if (err === UNSCANNED) return undefined;
    throw err;
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

class Scan {
  at = 0;
  private readonly text: Buffer;
  /** The bytes as 32-bit words from the first 4-aligned byte (`wordsFrom`), for long strings. */
  private readonly words: Uint32Array;
  private readonly wordsFrom: number;

  constructor(private readonly b: Uint8Array) {
    this.text = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
    this.wordsFrom = (4 - (b.byteOffset & 3)) & 3;
    this.words =
      b.byteLength < this.wordsFrom
        ? new Uint32Array(0)
        : new Uint32Array(b.buffer, b.byteOffset + this.wordsFrom, (b.byteLength - this.wordsFrom) >> 2);
  }

  /** JSON's whitespace: space, tab, newline, carriage return. */
  space(): void {
    const b = this.b;
    let i = this.at;
    for (; i < b.length; i++) {
      const c = b[i]!;
      if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
    }
    this.at = i;
  }

  value(depth: number): unknown {
    const c = this.b[this.at];
    if (c === QUOTE) return this.string();
    if (c === 0x7b) return this.object(depth + 1);
    if (c === 0x5b) return this.array(depth + 1);
    if (c === 0x74) return this.literal('true', true);
    if (c === 0x66) return this.literal('false', false);
    if (c === 0x6e) return this.literal('null', null);
    return this.number();
  }

  private object(depth: number): Record<string, unknown> {
    if (depth > MAX_DEPTH) throw UNSCANNED;
    const out: Record<string, unknown> = {};
    this.at++;
    this.space();
    if (this.b[this.at] === 0x7d) {
      this.at++;
      return out;
    }
    for (;;) {
      if (this.b[this.at] !== QUOTE) throw UNSCANNED;
      const key = this.string();
      // JSON.parse makes it an own property; an assignment would set the prototype.
      if (key === '__proto__') throw UNSCANNED;
      this.space();
      if (this.b[this.at] !== 0x3a) throw UNSCANNED;
      this.at++;
      this.space();
      out[key] = this.value(depth);
      this.space();
      const c = this.b[this.at++];
      if (c === 0x7d) return out;
      if (c !== 0x2c) throw UNSCANNED;
      this.space();
    }
  }

  private array(depth: number): unknown[] {
    if (depth > MAX_DEPTH) throw UNSCANNED;
    const out: unknown[] = [];
    this.at++;
    this.space();
    if (this.b[this.at] === 0x5d) {
      this.at++;
      return out;
    }
    for (;;) {
      out.push(this.value(depth));
      this.space();
      const c = this.b[this.at++];
      if (c === 0x5d) return out;
      if (c !== 0x2c) throw UNSCANNED;
      this.space();
    }
  }

  private literal(word: string, value: boolean | null): boolean | null {
    for (let k = 0; k < word.length; k++) if (this.b[this.at + k] !== word.charCodeAt(k)) throw UNSCANNED;
    this.at += word.length;
    return value;
  }

  /** JSON's number grammar, checked here; its value is what Number gives the same text. */
  private number(): number {
    const b = this.b;
    const start = this.at;
    let i = start;
    if (b[i] === 0x2d) i++;
    if (b[i] === 0x30) i++;
    else if (isDigit(b[i])) while (isDigit(b[i])) i++;
    else throw UNSCANNED;
    if (b[i] === 0x2e) {
      i++;
      if (!isDigit(b[i])) throw UNSCANNED;
      while (isDigit(b[i])) i++;
    }
    if (b[i] === 0x65 || b[i] === 0x45) {
      i++;
      if (b[i] === 0x2b || b[i] === 0x2d) i++;
      if (!isDigit(b[i])) throw UNSCANNED;
      while (isDigit(b[i])) i++;
    }
    this.at = i;
    return Number(this.text.toString('latin1', start, i));
  }

  /**
   * A string at `at` (its opening quote) without escapes: its bytes decoded, which is what
   * JSON.parse gives after the whole body is decoded (quotes are ASCII, so no UTF-8 sequence
   * spans one). A string with an escape is left to JSON.parse with the rest: decoding escapes here,
   * one at a time, took three times JSON.parse's time on prose with a newline every line.
   */
  private string(): string {
    const from = this.at + 1;
    const end = this.plainEnd(from);
    // A backslash, a raw control character, or the end.
    if (this.b[end] !== QUOTE) throw UNSCANNED;
    this.at = end + 1;
    // ASCII (the usual prompt) is the same text in Latin-1, which copies rather than decodes.
    const ascii = end - from >= ASCII_CHECK_FROM && isAscii(this.b.subarray(from, end));
    return this.text.toString(ascii ? 'latin1' : 'utf8', from, end);
  }

  /** The first byte from `i` that is a quote, a backslash or below 0x20 (or the length). */
  private plainEnd(i: number): number {
    const b = this.b;
    const n = b.length;
    let k = i;
    const bytewiseTo = Math.min(n, i + WORDWISE_FROM);
    for (; k < bytewiseTo; k++) if (special(b[k]!)) return k;
    if (k >= n) return n;
    // Up to the next word boundary, then 4 bytes at a time (SWAR: a zero byte of x ^ 0x22222222
    // is a quote; haszero and hasless from "Bit Twiddling Hacks", exact as tests of a whole word).
    for (; k < n && ((k - this.wordsFrom) & 3) !== 0; k++) if (special(b[k]!)) return k;
    const words = this.words;
    let w = (k - this.wordsFrom) >> 2;
    for (; w < words.length; w++) {
      const x = words[w]!;
      const q = x ^ 0x22222222;
      const s = x ^ 0x5c5c5c5c;
      if (
        (x - 0x20202020) & ~x & 0x80808080 ||
        (q - 0x01010101) & ~q & 0x80808080 ||
        (s - 0x01010101) & ~s & 0x80808080
      )
        break;
    }
    for (k = this.wordsFrom + 4 * w; k < n; k++) if (special(b[k]!)) return k;
    return n;
  }
}

function special(c: number): boolean {
  return c === QUOTE || c === BACKSLASH || c < 0x20;
}

function isDigit(c: number | undefined): boolean {
  return c !== undefined && c >= 0x30 && c <= 0x39;
}
