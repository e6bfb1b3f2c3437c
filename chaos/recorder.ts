/**
 * What a long fault run keeps of each node: the last lines in memory (a ring, so the end of the
 * run, where things go wrong, is never the part dropped), and with `--log-dir` every line on
 * disk, bounded, plus a resource sample per node now and then.
 */
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/** The last `capacity` items pushed, oldest first, and how many older ones were dropped. */
export class Ring<T> {
  private readonly items: T[] = [];
  private start = 0;
  dropped = 0;

  constructor(readonly capacity: number) {
    if (!(capacity > 0)) throw new Error('a ring needs a positive capacity');
  }

  push(item: T): void {
    if (this.items.length < this.capacity) {
      this.items.push(item);
      return;
    }
    this.items[this.start] = item;
    this.start = (this.start + 1) % this.capacity;
    this.dropped++;
  }

  get length(): number {
    return this.items.length;
  }

  toArray(): T[] {
    return [...this.items.slice(this.start), ...this.items.slice(0, this.start)];
  }
}

/**
 * A file written a line at a time, up to `maxBytes`; past that one marker line says how much
 * was left out (a 30-minute run logs a few MB a node; the cap only stops a runaway).
 */
export class BoundedLog {
  private readonly fd: number;
  private written = 0;
  private skipped = 0;

  constructor(
    readonly path: string,
    readonly maxBytes: number,
  ) {
    this.fd = openSync(path, 'w');
  }

  line(text: string): void {
    const bytes = Buffer.byteLength(text) + 1;
    if (this.written + bytes > this.maxBytes) {
      this.skipped++;
      return;
    }
    writeSync(this.fd, text + '\n');
    this.written += bytes;
  }

  close(): void {
    if (this.skipped > 0)
      writeSync(this.fd, `[${this.skipped} more lines left out: over ${this.maxBytes} bytes]\n`);
    closeSync(this.fd);
  }
}

/** Each node's full log may take this much; a few MB is usual for 30 minutes. */
export const NODE_LOG_MAX_BYTES = 64 * 1024 * 1024;

export function nodeLogPath(dir: string, index: number): string {
  return join(dir, `node-${index}.log`);
}

/** One node's resources at a moment: what a leak or starvation would show growing. */
export interface NodeSample {
  /** Seconds since traffic started. */
  t: number;
  node: number;
  /** Resident set of the plugin server, kB (/proc/PID/status VmRSS); -1 if unreadable. */
  rssKb: number;
  /** CPU seconds the plugin server has used so far (utime + stime). */
  cpuS: number;
  /** Open connections through the node's Redis proxy (live ioredis clients). */
  redisConnections: number;
  /** How long the node's last status request took, ms (-1: none answered yet). */
  statusMs: number;
}

/** A process's resident set (kB) and CPU seconds from /proc; -1 each when it is gone. */
export function procUsage(pid: number | undefined): { rssKb: number; cpuS: number } {
  if (pid === undefined) return { rssKb: -1, cpuS: -1 };
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const rss = /VmRSS:\s+(\d+)/.exec(status);
    // Fields after the command name (which may hold spaces, hence the last ')'): utime is the 14th
    // field of the line, stime the 15th, in clock ticks (100 a second on Linux).
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(rest[11]) + Number(rest[12]);
    return { rssKb: rss ? Number(rss[1]) : -1, cpuS: ticks / 100 };
  } catch {
    return { rssKb: -1, cpuS: -1 };
  }
}

export function sampleLine(s: NodeSample): string {
  return [s.t.toFixed(1), s.node, s.rssKb, s.cpuS.toFixed(2), s.redisConnections, s.statusMs].join(',');
}

export const SAMPLE_HEADER = 't_s,node,rss_kb,cpu_s,redis_connections,status_ms';
