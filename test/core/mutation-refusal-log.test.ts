/**
 * The refusal log (src/router/refusal-log.ts) alone: a refusal's detail is logged at most once per
 * error code every 10 s, and the next line says how many were left out since.
 */
import type { FleetRuntime } from '../../src/runtime';
import { RefusalLog } from '../../src/router/refusal-log';

describe('RefusalLog', () => {
  it('logs a code’s detail once per 10 s, counting what it left out, each code on its own', () => {
    let t = 0;
    const clock = { now: () => t, advance: (ms: number) => (t += ms) };
    const lines: string[] = [];
    const rt = { clock, log: { warn: (l: string) => lines.push(l) } } as unknown as FleetRuntime;
    const log = new RefusalLog();
    log.log(rt, 'no_replica', 'a');
    log.log(rt, 'no_replica', 'b');
    log.log(rt, 'overloaded', 'c');
    clock.advance(9_999);
    log.log(rt, 'no_replica', 'd');
    expect(lines).toEqual(['a', 'c']);
    clock.advance(1);
    log.log(rt, 'no_replica', 'e');
    log.log(rt, 'no_replica', 'f');
    clock.advance(10_000);
    log.log(rt, 'no_replica', 'g');
    clock.advance(10_000);
    log.log(rt, 'no_replica', 'h');
    expect(lines).toEqual([
      'a',
      'c',
      'e (and 2 more like it since the last line)',
      'g (and 1 more like it since the last line)',
      'h',
    ]);
  });
});
