/**
 * `node dist/stack/cli.js` (what `npm start` runs) as a child process, for tests: its output as
 * it comes, a bounded wait for a line, and a stop that never leaves it running.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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

/** A TMPDIR of its own: the plugin server's prefix folder is made there, and its command line names it. */
export function ownTmp() {
  const dir = mkdtempSync(join(tmpdir(), 'klr-start-'));
  // (v8-compile-cache-*: a compile cache a dependency keeps there, not ours to remove.)
  const folders = () => readdirSync(dir).filter((f) => !f.startsWith('v8-compile-cache'));
  /** Pids whose command line names the folder (read from /proc). */
  const processes = () =>
    readdirSync('/proc')
      .filter((d) => /^\d+$/.test(d))
      .filter((d) => {
        try {
          return readFileSync(`/proc/${d}/cmdline`, 'utf8').includes(dir);
        } catch {
          return false; // exited meanwhile
        }
      })
      .map(Number);
  return {
    dir,
    folders,
    /** What is left once the processes had 5 s to end: processes and folders. */
    leftBehind: async () => {
      await waitFor(() => processes().length === 0, 5000, 'no process left').catch(() => undefined);
      return { processes: processes(), folders: folders() };
    },
    /** Ends what a failed stop left (by pid) and removes the folder. */
    done: () => {
      for (const pid of processes()) process.kill(pid, 'SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
