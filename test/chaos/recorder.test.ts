/**
 * What a long fault run keeps of each node (chaos/recorder.ts): the last lines, not the first,
 * and a bounded file of every line.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BoundedLog, procUsage, Ring } from '../../chaos/recorder';

describe('fault-run recorder', () => {
  it('a ring keeps the last lines pushed, oldest first, and counts the dropped ones', () => {
    const r = new Ring<number>(3);
    for (let i = 1; i <= 2; i++) r.push(i);
    expect(r.toArray()).toEqual([1, 2]);
    expect(r.dropped).toBe(0);
    for (let i = 3; i <= 8; i++) r.push(i);
    expect(r.toArray()).toEqual([6, 7, 8]);
    expect(r.length).toBe(3);
    expect(r.dropped).toBe(5);
  });

  it('a bounded log writes every line up to its cap, then says how many it left out', () => {
    const dir = mkdtempSync(join(tmpdir(), 'chaos-log-'));
    try {
      const path = join(dir, 'node-0.log');
      const log = new BoundedLog(path, 20);
      log.line('first line');
      log.line('second'); // 11 + 7 = 18 bytes: fits
      log.line('third line'); // would pass 20
      log.line('4th');
      log.close();
      expect(readFileSync(path, 'utf8')).toBe('first line\nsecond\n[2 more lines left out: over 20 bytes]\n');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reads a live process its memory and CPU, and a gone one as -1', () => {
    const u = procUsage(process.pid);
    expect(u.rssKb).toBeGreaterThan(1000);
    expect(u.cpuS).toBeGreaterThan(0);
    expect(procUsage(undefined)).toEqual({ rssKb: -1, cpuS: -1 });
    expect(procUsage(2 ** 30)).toEqual({ rssKb: -1, cpuS: -1 });
  });
});
