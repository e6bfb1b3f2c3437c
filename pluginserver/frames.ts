/**
 * Where one MessagePack value ends in a byte stream, found from its headers without decoding
 * it (the format: github.com/msgpack/msgpack spec.md). The socket reader cuts Kong's stream
 * into messages with it: two messages in one write, one message over many writes. It reads
 * no more than the headers, so a large binary (a request body) costs nothing to find the end
 * of, and a length announced past the bound is refused before a byte of it is buffered.
 */

export type Scan =
  /** The value occupies `[start, end)`. */
  | { kind: 'whole'; end: number }
  /** Not complete: nothing can be said before the buffer holds `need` bytes from its start. */
  | { kind: 'partial'; need: number }
  | { kind: 'invalid'; reason: string };

/** Bytes a fixed-size value takes, by its first byte (nil, booleans, numbers, fixext). */
const FIXED: Record<number, number> = {
  0xc0: 1,
  0xc2: 1,
  0xc3: 1,
  0xca: 5,
  0xcb: 9,
  0xcc: 2,
  0xcd: 3,
  0xce: 5,
  0xcf: 9,
  0xd0: 2,
  0xd1: 3,
  0xd2: 5,
  0xd3: 9,
  0xd4: 3,
  0xd5: 4,
  0xd6: 6,
  0xd7: 10,
  0xd8: 18,
};

/** str, bin and ext with a length field: [bytes of the length, bytes before the payload]. */
const SIZED: Record<number, [number, number]> = {
  0xc4: [1, 2],
  0xc5: [2, 3],
  0xc6: [4, 5],
  0xc7: [1, 3], // ext 8: length, then a type byte
  0xc8: [2, 4],
  0xc9: [4, 6],
  0xd9: [1, 2],
  0xda: [2, 3],
  0xdb: [4, 5],
};

/** array 16/32 and map 16/32: [bytes of the count, items per entry]. */
const COUNTED: Record<number, [number, number]> = {
  0xdc: [2, 1],
  0xdd: [4, 1],
  0xde: [2, 2],
  0xdf: [4, 2],
};

function readLength(buf: Uint8Array, at: number, bytes: number): number {
  let n = 0;
  for (let i = 0; i < bytes; i++) n = n * 256 + buf[at + i]!;
  return n;
}

/**
 * Scans one value starting at `start`. `maxBytes` bounds its size: a value that announces more
 * (a length, or more items than bytes could remain) is invalid at once.
 */
export function scanValue(buf: Uint8Array, start: number, maxBytes: number): Scan {
  const limit = start + maxBytes;
  let pos = start;
  // Values still to read: containers add their items, so nesting costs no recursion.
  let pending = 1;
  while (pending > 0) {
    if (pos >= buf.length) return { kind: 'partial', need: pos + 1 - start };
    const b = buf[pos]!;
    pending--;
    let size: number;
    if (b <= 0x7f || b >= 0xe0)
      size = 1; // fixints
    else if (b <= 0x8f) {
      size = 1;
      pending += 2 * (b & 0x0f); // fixmap
    } else if (b <= 0x9f) {
      size = 1;
      pending += b & 0x0f; // fixarray
    } else if (b <= 0xbf)
      size = 1 + (b & 0x1f); // fixstr
    else if (FIXED[b] !== undefined) size = FIXED[b]!;
    else if (SIZED[b] !== undefined || COUNTED[b] !== undefined) {
      const [lengthBytes, extra] = SIZED[b] ?? COUNTED[b]!;
      if (pos + 1 + lengthBytes > buf.length) return { kind: 'partial', need: pos + 1 + lengthBytes - start };
      const n = readLength(buf, pos + 1, lengthBytes);
      if (SIZED[b] !== undefined) size = extra + n;
      else {
        size = 1 + lengthBytes;
        pending += n * extra;
      }
    } else
      return {
        kind: 'invalid',
        reason: `byte 0x${b.toString(16)} at offset ${pos - start} is no MessagePack type`,
      };
    // Every pending value takes at least one byte.
    if (pos + size + pending > limit)
      return { kind: 'invalid', reason: `a message larger than ${maxBytes} bytes` };
    if (pos + size > buf.length) return { kind: 'partial', need: pos + size - start };
    pos += size;
  }
  return { kind: 'whole', end: pos };
}
