/**
 * `node dist/stack/cli.js` (what `npm start` runs) as a child process, for tests: its output as
 * it comes, a bounded wait for a line, and a stop that never leaves it running.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { waitFor } from '../../harness/wait';

export const ROOT = join(__dirname, '..', '..');
export const CLI = join(ROOT, 'dist', 'stack', 'cli.js');

export interface CliProcess {
  child: ChildProcess;
  /** Everything printed so far, stdout and stderr in arrival order. */
  out: () => string;
  /** Waits (bounded) until the output matches `re`, or the process ended. */
  until: (re: RegExp, ms?: number) => Promise<RegExpMatchArray>;
  /** Its exit code once ended (bounded wait). */
  exited: (ms?: number) => Promise<number | null>;
  /** SIGINT, then SIGKILL if it is still running after 10 s. */
  stop: () => Promise<void>;
}

/** Starts the CLI; `detached`: in a process group of its own, as a terminal's job is. */
export function startCli(
  args: string[],
  o: { env?: Record<string, string>; detached?: boolean } = {},
): CliProcess {
  let out = '';
  const child = spawn(process.execPath, [CLI, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...o.env },
    detached: o.detached,
  });
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const ended = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const running = () => child.exitCode === null && child.signalCode === null;
  return {
    child,
    out: () => out,
    until: async (re, ms = 30_000) => {
      await waitFor(() => re.test(out) || !running(), ms, `${re} in the output:\n${out}\n`);
      const m = out.match(re);
      if (!m) throw new Error(`the process ended without ${re}:\n${out}`);
      return m;
    },
    exited: async (ms = 30_000) => {
      await waitFor(() => !running(), ms, `the process to end:\n${out}\n`);
      return ended;
    },
    stop: async () => {
      if (!running()) return;
      child.kill('SIGINT');
      await Promise.race([ended, new Promise((r) => setTimeout(r, 10_000))]);
      if (running()) child.kill('SIGKILL');
    },
  };
}

/** A copy of the repository's kong.yml, changed by `edit`, in a temporary folder (removed by `done`). */
export function kongYamlCopy(edit: (deck: any) => void): { file: string; done: () => void } {
  const deck = parse(readFileSync(join(ROOT, 'kong.yml'), 'utf8'));
  edit(deck);
  const dir = mkdtempSync(join(tmpdir(), 'klr-kong-yml-'));
  const file = join(dir, 'kong.yml');
  writeFileSync(file, stringify(deck));
  return { file, done: () => rmSync(dir, { recursive: true, force: true }) };
}
