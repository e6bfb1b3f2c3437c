/**
 * `npm start` as a user runs it, through npm itself: stopping npm's pid stops the stack and
 * frees its ports, and `--help` answers without rebuilding.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { waitFor } from '../../harness/wait';

const ROOT = join(__dirname, '..', '..');

function npm(args: string[]): { child: ChildProcess; output: () => string } {
  let out = '';
  const child = spawn('npm', args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  return { child, output: () => out };
}

function exited(child: ChildProcess, ms: number): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`still running after ${ms} ms`)), ms);
    child.once('exit', (code) => {
      clearTimeout(t);
      resolve(code);
    });
  });
}

/** Whether something accepts connections on this loopback port. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: '127.0.0.1' });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** Pids of a process's descendants (read from /proc). */
function descendants(pid: number): number[] {
  const parent = new Map<number, number>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      // pid (comm) state ppid ...: comm may hold spaces, so read after the last ')'.
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      parent.set(Number(d), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // exited meanwhile
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const [c, pp] of parent) {
      if (pp !== p) continue;
      out.push(c);
      walk(c);
    }
  };
  walk(pid);
  return out;
}

async function startedStack(): Promise<{ child: ChildProcess; ports: number[]; output: () => string }> {
  const run = npm(['start', '--', '--port', '0', '--fleet-port', '0']);
  // A build check, a fleet and a plugin server start: seconds quiet, a minute on a loaded machine.
  await waitFor(() => /Ctrl-C stops everything/.test(run.output()), 120_000, 'the stack started');
  const ports = [...run.output().matchAll(/http:\/\/127\.0\.0\.1:(\d+)/g)].map((m) => Number(m[1]));
  return { ...run, ports: [...new Set(ports)] };
}

describe('npm start through npm', () => {
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`${signal} to npm's pid stops the stack and frees the gateway's and the fleet's ports`, async () => {
      const { child, ports, output } = await startedStack();
      const tree = descendants(child.pid!);
      try {
        expect(ports.length).toBeGreaterThanOrEqual(6); // the gateway and five replicas
        for (const p of ports) expect(await listening(p)).toBe(true);
        child.kill(signal);
        await exited(child, 15_000);
        await waitFor(
          async () => (await Promise.all(ports.map(listening))).every((l) => !l),
          10_000,
          'ports freed',
        ).catch(() => undefined);
        const still = [];
        for (const p of ports) if (await listening(p)) still.push(p);
        expect({ still, output: still.length ? output() : '' }).toEqual({ still: [], output: '' });
      } finally {
        // Whatever a failed stop left behind (it started them): by pid.
        for (const pid of [child.pid!, ...tree]) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // already gone
          }
        }
      }
    }, 180_000);
  }

  it('answers --help without rebuilding dist/', async () => {
    const before = statSync(join(ROOT, 'dist', 'stack', 'cli.js')).mtimeMs;
    const { child, output } = npm(['start', '--', '--help']);
    expect(await exited(child, 30_000)).toBe(0);
    expect(output()).toMatch(/Usage: npm start/);
    expect(statSync(join(ROOT, 'dist', 'stack', 'cli.js')).mtimeMs).toBe(before);
  }, 40_000);
});
