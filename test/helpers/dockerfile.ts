import { execFileSync, execSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, posix, relative, sep } from 'node:path';

/**
 * There is no Docker engine here, so a test replays a Dockerfile's build stages on the host:
 * the same COPY lines from the repository into a temp dir, the same RUN commands there. Only
 * the instructions the project's Dockerfile uses are understood; anything else is an error, so
 * a new instruction cannot be skipped silently.
 */
export interface Copy {
  from?: string;
  sources: string[];
  dest: string;
}
export type Step = { kind: 'copy'; copy: Copy } | { kind: 'run'; command: string };
export interface Stage {
  name: string;
  base: string;
  workdir: string;
  steps: Step[];
}

export function parseDockerfile(text: string): Stage[] {
  const lines = text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  const stages: Stage[] = [];
  for (const line of lines) {
    const [op, ...rest] = line.split(/\s+/);
    const args = rest.join(' ');
    const stage = stages[stages.length - 1];
    switch (op!.toUpperCase()) {
      case 'ARG':
        break;
      case 'FROM': {
        const m = args.match(/^(\S+)(?:\s+AS\s+(\S+))?$/i)!;
        const parent = stages.find((s) => s.name === m[1]);
        stages.push({
          name: m[2] ?? `#${stages.length}`,
          base: m[1]!,
          workdir: parent?.workdir ?? '/',
          steps: [],
        });
        break;
      }
      case 'WORKDIR':
        stage!.workdir = posix.resolve(stage!.workdir, args);
        break;
      case 'COPY': {
        const words = args.split(/\s+/);
        const from = words.find((w) => w.startsWith('--from='))?.slice('--from='.length);
        const paths = words.filter((w) => !w.startsWith('--'));
        stage!.steps.push({
          kind: 'copy',
          copy: { from, sources: paths.slice(0, -1), dest: paths[paths.length - 1]! },
        });
        break;
      }
      case 'RUN':
        stage!.steps.push({ kind: 'run', command: args });
        break;
      case 'USER':
        break;
      default:
        throw new Error(`Dockerfile: instruction not understood by the replay: ${line}`);
    }
  }
  return stages;
}

/** The stage and the stages it is built FROM, oldest first. */
export function stageChain(stages: Stage[], name: string): Stage[] {
  const stage = stages.find((s) => s.name === name);
  if (!stage) throw new Error(`Dockerfile: no stage ${name}`);
  return [...(stages.some((s) => s.name === stage.base) ? stageChain(stages, stage.base) : []), stage];
}

/** Docker's globs as regular expressions (moby/patternmatcher 1d6a3f4 `Pattern.compile`). */
const GLOB: Record<string, string> = { '**/': '(.*/)?', '**': '.*', '*': '[^/]*', '?': '[^/]' };

/**
 * What `.dockerignore` leaves out of the build context, as Docker reads it (moby/patternmatcher
 * 1d6a3f4 patternmatcher.go `MatchesOrParentMatches`; ignorefile_test.go `TestReadAll`): one
 * pattern a line relative to the context (a leading `/` dropped, `#` a comment), `*` and `?`
 * within one path segment, `**` across any number, `!` taking a path back in; the last pattern
 * that matches the path or one of its parent folders decides.
 */
export function dockerIgnored(context: string): (path: string) => boolean {
  const file = join(context, '.dockerignore');
  const rules = (existsSync(file) ? readFileSync(file, 'utf8') : '')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => {
      const exclusion = l.startsWith('!');
      const pattern = posix.normalize((exclusion ? l.slice(1) : l).replace(/^\//, ''));
      const source = pattern
        .split(/(\*\*\/?|\*|\?)/)
        .map((part) => GLOB[part] ?? part.replace(/[.+()|{}$^]/g, '\\$&'))
        .join('');
      return { exclusion, re: new RegExp(`^${source}$`) };
    });
  return (path) => {
    const parts = posix.normalize(path).split('/');
    const prefixes = parts.map((_, i) => parts.slice(0, i + 1).join('/'));
    let ignored = false;
    for (const rule of rules) if (prefixes.some((p) => rule.re.test(p))) ignored = !rule.exclusion;
    return ignored;
  };
}

/**
 * Docker's COPY from the build context: a directory's contents go into the destination, a file
 * into it when the destination ends in `/` (or several sources are given), else to that path.
 * What `.dockerignore` leaves out is not in the context.
 */
function copyInto(context: string, root: string, workdir: string, copy: Copy): void {
  const dest = join(root, posix.resolve(workdir, copy.dest));
  const intoDir = copy.dest.endsWith('/') || copy.sources.length > 1;
  const ignored = dockerIgnored(context);
  const inContext = (path: string) => !ignored(relative(context, path).split(sep).join('/'));
  for (const source of copy.sources) {
    const from = join(context, source);
    if (!existsSync(from) || !inContext(from)) throw new Error(`COPY ${source}: not in the build context`);
    if (statSync(from).isDirectory()) {
      cpSync(from, dest, { recursive: true, filter: inContext });
    } else {
      const to = intoDir ? join(dest, basename(source)) : dest;
      mkdirSync(join(to, '..'), { recursive: true });
      cpSync(from, to);
    }
  }
}

/** What a RUN does that the replay provides instead: the dependencies come from this checkout. */
const PROVIDED = [/^npm ci\b/, /^npm prune\b/];
/** Files a stage takes from its base image, and the host's equivalent the replay uses. */
const FROM_BASE_IMAGE: Record<string, string> = { '/usr/local/bin/node': process.execPath };

export interface Replay {
  /** The temp dir standing for the image's `/`. */
  root: string;
  /** The stage's WORKDIR inside `root`. */
  workdir: string;
  /** The RUN commands executed, in order. */
  ran: string[];
}

/**
 * Replays the stages of a Dockerfile with `context` as the build context, each stage into a
 * temp dir standing for its `/`: every COPY (from the context, or `--from` an earlier stage's
 * replay), every RUN command in the WORKDIR. `npm ci` is replaced by a symlink to this
 * checkout's node_modules and `npm prune` is skipped (it would prune the shared node_modules);
 * a RUN joining commands with `&&` runs each of them. A RUN in a stage not built on a Node image
 * (the Kong stage) cannot run on this host and is refused.
 */
export class DockerReplay {
  readonly stages: Stage[];
  private readonly done = new Map<string, Replay>();
  private readonly roots: string[] = [];

  constructor(
    dockerfile: string,
    private readonly context: string,
  ) {
    this.stages = parseDockerfile(dockerfile);
  }

  /** The stage built last, the image `docker build` makes without `--target`. */
  get final(): Stage {
    return this.stages[this.stages.length - 1]!;
  }

  stage(name: string): Replay {
    const cached = this.done.get(name);
    if (cached) return cached;
    const root = mkdtempSync(join(tmpdir(), 'klr-image-'));
    this.roots.push(root);
    const chain = stageChain(this.stages, name);
    const onNode = /^node:/.test(chain[0]!.base);
    const ran: string[] = [];
    for (const s of chain) {
      mkdirSync(join(root, s.workdir), { recursive: true });
      for (const step of s.steps) {
        if (step.kind === 'copy') this.copy(root, s.workdir, step.copy);
        else ran.push(...this.run(root, s, step.command, onNode));
      }
    }
    const replay = { root, workdir: join(root, chain[chain.length - 1]!.workdir), ran };
    this.done.set(name, replay);
    return replay;
  }

  /** Removes every replayed stage's temp dir. */
  close(): void {
    for (const r of this.roots) rmSync(r, { recursive: true, force: true });
  }

  private copy(root: string, workdir: string, copy: Copy): void {
    if (!copy.from) return copyInto(this.context, root, workdir, copy);
    const from = this.stage(copy.from).root;
    for (const source of copy.sources) {
      const replayed = join(from, source);
      const dest = join(root, posix.resolve(workdir, copy.dest));
      const to =
        copy.dest.endsWith('/') && !statSync(replayed, { throwIfNoEntry: false })?.isDirectory()
          ? join(dest, basename(source))
          : dest;
      mkdirSync(join(to, '..'), { recursive: true });
      if (existsSync(replayed)) cpSync(replayed, to, { recursive: true, verbatimSymlinks: true });
      else if (FROM_BASE_IMAGE[source]) symlinkSync(FROM_BASE_IMAGE[source]!, to);
      else throw new Error(`COPY --from=${copy.from} ${source}: the stage does not make it`);
    }
  }

  private run(root: string, stage: Stage, command: string, onNode: boolean): string[] {
    if (!onNode)
      throw new Error(`RUN in stage ${stage.name} (not a Node image) cannot be replayed: ${command}`);
    const ran: string[] = [];
    for (const c of command.split('&&').map((x) => x.trim())) {
      if (/^npm ci\b/.test(c)) {
        const modules = join(root, stage.workdir, 'node_modules');
        if (!existsSync(modules)) symlinkSync(join(this.context, 'node_modules'), modules);
      }
      if (PROVIDED.some((p) => p.test(c))) continue;
      try {
        execSync(c, { cwd: join(root, stage.workdir), stdio: 'pipe', timeout: 120_000 });
      } catch (e) {
        const err = e as { stdout?: Buffer; stderr?: Buffer };
        throw new Error(`RUN ${c} failed in stage ${stage.name}:\n${err.stdout ?? ''}${err.stderr ?? ''}`);
      }
      ran.push(c);
    }
    return ran;
  }
}

/**
 * Runs `argv` as it would run inside a replayed image at `root`: every absolute path re-rooted
 * there. A `#!/bin/sh` wrapper's `exec ... "$@"` line is followed the same way, so the command
 * runs the image's files, not the checkout's.
 */
export function runReRooted(root: string, argv: string[], timeout: number): Buffer {
  const reRoot = (a: string) => (a.startsWith('/') ? join(root, a) : a);
  const [bin, ...args] = argv.map(reRoot);
  const text = readFileSync(bin!, 'utf8');
  let command: string[];
  if (text.startsWith('#!/bin/sh')) {
    const exec = text.match(/^exec (.+) "\$@"$/m);
    if (!exec) throw new Error(`${argv[0]}: no exec ... "$@" line`);
    command = [...exec[1]!.split(/\s+/).map(reRoot), ...args];
  } else if (text.startsWith('#!/usr/bin/env node')) {
    command = [process.execPath, bin!, ...args];
  } else {
    throw new Error(`${argv[0]}: neither a sh wrapper nor a node script`);
  }
  return execFileSync(command[0]!, command.slice(1), { timeout });
}
