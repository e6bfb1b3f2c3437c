/**
 * The demo's and the start banner's small promises: no hit rate for nothing answered, a rate
 * of 0 refused in plain words, a quiet `--exit`, and no curl for a llama.cpp adapter when no
 * llama.cpp replica is there to serve it.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { SimFleet } from '../../sim/fleet';
import { summaryTable, type TrafficStats } from '../../stack/traffic';

const CLI = join(__dirname, '..', '..', 'dist', 'stack', 'cli.js');

/** Runs the CLI to its end (or kills it after `ms`); its exit code and all it printed. */
function run(args: string[], ms = 60_000, until?: RegExp): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    let out = '';
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    const t = setTimeout(() => child.kill('SIGKILL'), ms);
    const seen = (c: Buffer) => {
      out += c.toString();
      if (until?.test(out)) child.kill('SIGINT');
    };
    child.stdout!.on('data', seen);
    child.stderr!.on('data', seen);
    child.on('exit', (code) => {
      clearTimeout(t);
      resolve({ code, out });
    });
  });
}

describe('the demo summary', () => {
  it('shows no hit rate when nothing was served', () => {
    const s: TrafficStats = {
      sent: 5,
      done: 5,
      ok: 0,
      errors: { 503: 5 },
      loads: 0,
      hitRate: 1,
      ttftMs: { p50: NaN, p90: NaN, p99: NaN },
      e2eMs: { p50: NaN, p99: NaN },
      elapsedS: 1,
      throughput: 0,
    };
    const table = summaryTable(s);
    expect(table).toMatch(/hit rate \(1 - loads \/ served\)\s+\|\s+-\s+\|/);
    expect(table).not.toMatch(/100/);
  });
});

describe('npm run demo options', () => {
  it('refuses --rate 0 in plain words, before starting anything', async () => {
    const { code, out } = await run(['--port', '0', '--fleet-port', '0', '--traffic', '--rate', '0'], 20_000);
    expect(code).toBe(1);
    expect(out).toMatch(/--rate must be a positive number/);
    expect(out).not.toMatch(/Ctrl-C stops everything/);
  }, 30_000);

  it('--exit stops after the demo without a log-phase error', async () => {
    const { code, out } = await run(
      ['--port', '0', '--fleet-port', '0', '--traffic', '--requests', '12', '--time-scale', '8', '--exit'],
      60_000,
    );
    expect(out).toMatch(/\| answered 200\s+\| \d+ \|/);
    expect(out).not.toMatch(/log failed|ECONNRESET|EPIPE/);
    expect(code).toBe(0);
  }, 70_000);
});

describe('the start banner', () => {
  it('offers no llama.cpp adapter curl when no llama.cpp replica is given', async () => {
    const fleet = await SimFleet.start([
      { backend: 'vllm', runtimeLoading: true, adapterDirs: ['/adapters/'] },
    ]);
    try {
      const { out } = await run(
        ['--port', '0', '--replicas', `vllm=${fleet.urls[0]}`],
        30_000,
        /Ctrl-C stops everything/,
      );
      expect(out).toMatch(/Ctrl-C stops everything/);
      expect(out).not.toMatch(/support-gguf|legal-gguf/);
    } finally {
      await fleet.stop();
    }
  }, 40_000);
});
