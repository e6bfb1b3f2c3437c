/** `npm run demo`'s program: a bounded workload, labelled progress, and a plain word that it keeps serving. */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { plainLines } from '../../stack/log-lines';
import { progressLine, type TrafficStats } from '../../stack/traffic';
import { waitFor } from '../../harness/wait';

const CLI = join(__dirname, '..', '..', 'dist', 'stack', 'cli.js');

const stats = (o: Partial<TrafficStats>): TrafficStats => ({
  sent: 0,
  done: 0,
  ok: 0,
  errors: {},
  loads: 0,
  hitRate: 1,
  ttftMs: { p50: NaN, p90: NaN, p99: NaN },
  e2eMs: { p50: NaN, p99: NaN },
  elapsedS: 0,
  throughput: 0,
  ...o,
});

describe('the demo progress line', () => {
  it('labels its figures and shows no hit rate before anything was answered', () => {
    const line = progressLine(stats({ sent: 13 }));
    expect(line).toMatch(/answered 0 of 13 sent/);
    expect(line).toMatch(/adapter loads 0/);
    expect(line).toMatch(/hit rate -/);
    expect(line).not.toMatch(/100%/);
  });

  it('shows the hit rate once requests were answered', () => {
    const line = progressLine(
      stats({ sent: 10, done: 8, ok: 7, errors: { 503: 1 }, loads: 2, hitRate: 0.75 }),
    );
    expect(line).toMatch(/answered 8 of 10 sent \(7 ok, 1 errors\)/);
    expect(line).toMatch(/hit rate 75%/);
  });
});

describe("the plugin server's log under --verbose", () => {
  it('keeps the last drawing of each line, without terminal codes', async () => {
    // As kong-js-pluginserver 0.6.0 writes one log line (captured from `npm start -- --verbose`).
    const drawn = [
      '2026-12-01T02:32:08.725Z \x1b[0m',
      '\x1b[1A\x1b[K',
      '\x1b[1A2026-12-01T02:32:08.725Z \x1b[0m\x1b[42m\x1b[30m[INFO]\x1b[0m',
      '\x1b[1A\x1b[K',
      '\x1b[1A2026-12-01T02:32:08.725Z \x1b[0m\x1b[42m\x1b[30m[INFO]\x1b[0m \x1b[0m\x1b[32mserver started at /tmp/x/lora.sock\x1b[0m',
      '2026-12-01T02:32:08.739Z \x1b[0m',
      '\x1b[1A\x1b[K',
      '\x1b[1A2026-12-01T02:32:08.739Z \x1b[0m\x1b[42m\x1b[30m[INFO]\x1b[0m \x1b[0m\x1b[32minstance #0 of lora-router started\x1b[0m',
    ];
    const out: string[] = [];
    const push = plainLines((l) => out.push(l), 10);
    for (const l of drawn) push(l);
    await waitFor(() => out.length === 2, 2000, 'both lines');
    expect(out).toEqual([
      '2026-12-01T02:32:08.725Z [INFO] server started at /tmp/x/lora.sock',
      '2026-12-01T02:32:08.739Z [INFO] instance #0 of lora-router started',
    ]);
  });
});

describe('npm run demo', () => {
  it('runs its bounded workload, prints the summary, then says it keeps serving', async () => {
    let out = '';
    const child = spawn(
      process.execPath,
      [CLI, '--port', '0', '--fleet-port', '0', '--traffic', '--requests', '4', '--time-scale', '4'],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
    try {
      await waitFor(() => /keeps serving/.test(out), 60_000, `"keeps serving" in:\n${out}`);
      expect(out).toMatch(/\| answered 200\s+\| \d+ \|/);
      const gw = out.match(/gateway\s+(http:\/\/\S+)/)![1]!;
      expect(out).toMatch(new RegExp(`demo done\\. The stack keeps serving on ${gw} \\(Ctrl-C stops it`));
      expect(child.exitCode).toBe(null);
    } finally {
      child.kill('SIGINT');
    }
  }, 70_000);
});
