import { parseBody } from '../src/router/request';
import { chatBody, routeBed } from './overhead';

/** CPU µs of one in-process route + release: back to back, and each after the process slept. */
export interface ColdRouteCost {
  /** Back to back: the code, its data and the branch history stay in the core's caches. */
  hotUs: number;
  /** Each call after a sleep of `gapMs`, as the plugin server runs it (it sleeps between PDK replies). */
  coldUs: number;
  gapMs: number;
  calls: number;
}

/**
 * Why route() costs several times more inside the plugin server than in a loop: there, each
 * request's decision runs right after the process slept in epoll for a PDK reply, while the other
 * processes ran. The same call in process, timed alone (process.cpuUsage around it, every
 * thread), back to back and then each after a `gapMs` sleep (bench/overhead.ts `routeBed`:
 * 8 replicas, 16 resident adapters). The clock's advance is not what costs: on a virtual clock
 * moved 1 ms a call and no sleep, a call costs what it does back to back.
 */
export async function coldRouteRelease(calls = 1000, gapMs = 1): Promise<ColdRouteCost> {
  const bed = await routeBed();
  try {
    let i = 0;
    const timed = async () => {
      const t0 = process.cpuUsage();
      await bed.routeRelease(i++);
      const t = process.cpuUsage(t0);
      return t.user + t.system;
    };
    for (let k = 0; k < 2000; k++) await bed.routeRelease(i++);
    // The best of three rounds each: other processes only ever add.
    let hotUs = Infinity;
    let coldUs = Infinity;
    for (let round = 0; round < 3; round++) {
      let hot = 0;
      for (let k = 0; k < calls; k++) hot += await timed();
      hotUs = Math.min(hotUs, hot / calls);
      let cold = 0;
      for (let k = 0; k < calls; k++) {
        await new Promise((r) => setTimeout(r, gapMs));
        cold += await timed();
      }
      coldUs = Math.min(coldUs, cold / calls);
    }
    return { hotUs, coldUs, gapMs, calls };
  } finally {
    bed.stop();
  }
}

/** CPU µs to read a chat body in process: bytes to text, then the `model` and the checks (src/router/request.ts `parseBody`). */
export interface BodyReadCost {
  size: string;
  bytes: number;
  /** UTF-8 bytes to a string (part of `parseBody`). */
  decodeUs: number;
  parseBodyUs: number;
}

/**
 * What reading the body costs lora-router and not the no-op (which reads the same bytes over the
 * same PDK call and parses nothing), at the overhead rows' body sizes: the best of three rounds.
 */
export function bodyReadCost(
  sizes: Record<string, number> = { '1 KB': 1024, '1 MB': 1 << 20 },
): BodyReadCost[] {
  return Object.entries(sizes).map(([size, bytes]) => {
    const body = new Uint8Array(chatBody(bytes));
    const calls = bytes > 100_000 ? 100 : 10_000;
    const best = (f: () => unknown) => {
      let us = Infinity;
      for (let round = 0; round < 4; round++) {
        const t0 = process.cpuUsage();
        for (let i = 0; i < calls; i++) f();
        const t = process.cpuUsage(t0);
        // The first round warms up.
        if (round > 0) us = Math.min(us, (t.user + t.system) / calls);
      }
      return us;
    };
    return {
      size,
      bytes,
      decodeUs: best(() => Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8')),
      parseBodyUs: best(() => parseBody(body, 'inference', 1 << 30)),
    };
  });
}
