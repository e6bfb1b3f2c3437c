/**
 * README is a plugin's page: short, with every link, file and command in it working. This test
 * reads README.md and the docs/ pages, checks every relative link and #anchor, every `npm ...`
 * script and every repository path they name, and runs what can run here: `npm start -- --help`
 * and the quick start's curl commands against a stack started on free loopback ports.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { parsePollerConfig, parseRouterConfig } from '../../src/config/parse';
import { waitFor } from '../../harness/wait';

const ROOT = join(__dirname, '..', '..');
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');
const run = promisify(execFile);

/** The pages a user reaches from README: README itself, DEVELOPERS.md and every page in docs/. */
const PAGES = [
  'README.md',
  'DEVELOPERS.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];
const MAX_LINES = 250;
const MAX_WIDTH = 120;

/** A page's lines, each marked as inside a fenced code block or not. */
function lines(text: string): { text: string; code: boolean; n: number }[] {
  let fence = false;
  return text.split('\n').map((t, i) => {
    const isFence = /^\s*```/.test(t);
    if (isFence) fence = !fence;
    return { text: t, code: fence || isFence, n: i + 1 };
  });
}

/** Prose with inline code spans removed (a link or path inside backticks is not a link). */
const prose = (text: string) =>
  lines(text)
    .filter((l) => !l.code)
    .map((l) => l.text.replace(/`[^`]*`/g, ''));

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to '-', repeats numbered. */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const l of lines(text)) {
    const m = !l.code && /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(l.text);
    if (!m) continue;
    const slug = m[1]!
      .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
      .replace(/<[^>]+>/g, '')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const k = seen.get(slug) ?? 0;
    seen.set(slug, k + 1);
    out.add(k ? `${slug}-${k}` : slug);
  }
  return out;
}

/** Relative link targets of a page (markdown links and images outside code). */
function links(text: string): string[] {
  // Joined, so that a link whose text wraps onto the next line is still found.
  const matches = prose(text)
    .join('\n')
    .matchAll(/!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g);
  return [...matches].map((m) => m[1]!).filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target));
}

/** The fenced blocks of a page, with the language after the fence. */
function blocks(text: string): { lang: string; body: string }[] {
  return [...text.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m) => ({ lang: m[1]!, body: m[2]! }));
}

/** Inline code spans and fenced code of a page. */
function code(text: string): string[] {
  const spans = lines(text)
    .filter((l) => !l.code)
    .flatMap((l) => [...l.text.matchAll(/`([^`]+)`/g)].map((m) => m[1]!));
  return [
    ...spans,
    ...lines(text)
      .filter((l) => l.code)
      .map((l) => l.text),
  ];
}

const TOP = new Set(
  readdirSync(ROOT).filter((f) => !['lib', 'node_modules', 'dist'].includes(f) && !f.startsWith('.')),
);

/** Repository paths a page names in code spans: a first segment that is a top-level entry. */
function paths(text: string): string[] {
  return code(text).filter(
    (s) =>
      /^[\w.-]+(\/[\w.-]*)*$/.test(s) && TOP.has(s.split('/')[0]!) && (s.includes('/') || s.includes('.')),
  );
}

/** `npm X` and `npm run X` named anywhere in a page. */
function npmCommands(text: string): { run: boolean; name: string }[] {
  const out: { run: boolean; name: string }[] = [];
  for (const c of code(text))
    for (const m of c.matchAll(/\bnpm\s+(run\s+)?([a-z][\w-]*(?::[a-z][\w-]*)*)/g))
      out.push({ run: !!m[1], name: m[2]! });
  return out;
}

const scripts = JSON.parse(read('package.json')).scripts as Record<string, string>;
/** npm's own commands a page may name; `start` and `test` are scripts, checked as such. */
const NPM_BUILTIN = new Set(['ci', 'install', 'pack', 'prefix', 'root', 'exec', 'ls']);

describe('README and docs: every link, file and command', () => {
  const readme = read('README.md');

  it(`README is a page, not a report: at most ${MAX_LINES} lines, none over ${MAX_WIDTH} characters outside tables and code`, () => {
    const all = readme.trimEnd().split('\n');
    const wide = lines(readme)
      .filter((l) => !l.code && !l.text.startsWith('|') && [...l.text].length > MAX_WIDTH)
      .map((l) => `line ${l.n}: ${[...l.text].length} characters`);
    expect({ lines: all.length <= MAX_LINES ? 'within' : `${all.length} lines`, wide }).toEqual({
      lines: 'within',
      wide: [],
    });
  });

  it('README opens with a table of contents that reaches the install on Kong in one step', () => {
    const head = readme.split('\n').slice(0, 40).join('\n');
    const toc = [...head.matchAll(/\[[^\]]+\]\(#([^)]+)\)/g)].map((m) => m[1]!);
    expect(toc.filter((a) => /install|deploy/.test(a)).length).toBeGreaterThan(0);
    const own = anchors(readme);
    expect(toc.filter((a) => !own.has(a))).toEqual([]);
  });

  it('README names no issue number or internal name a user cannot know', () => {
    const found = prose(readme).filter((l) =>
      /\bissue \d+|\bi\d+-[a-z]+\b|the seed's|\bbelady\b|\boracle\b/i.test(l),
    );
    expect(found).toEqual([]);
  });

  it.each(PAGES)('%s: every relative link and #anchor resolves', (page) => {
    const broken: string[] = [];
    for (const target of links(read(page))) {
      const [file, anchor] = target.split('#', 2) as [string, string | undefined];
      const path = file ? normalize(join(dirname(page), decodeURI(file))) : page;
      if (!existsSync(join(ROOT, path))) {
        broken.push(`${target}: no file ${path}`);
        continue;
      }
      if (anchor !== undefined && path.endsWith('.md') && !anchors(read(path)).has(anchor))
        broken.push(`${target}: no heading #${anchor} in ${path}`);
    }
    expect(broken).toEqual([]);
  });

  it.each(PAGES)(
    '%s: every file path it names exists, and every npm script it names is in package.json',
    (page) => {
      const text = read(page);
      const missing = paths(text).filter((p) => !existsSync(join(ROOT, p)));
      const unknown = npmCommands(text)
        .filter((c) => (c.run || !NPM_BUILTIN.has(c.name)) && !(c.name in scripts))
        .map((c) => `npm ${c.run ? 'run ' : ''}${c.name}`);
      expect({ missing, unknown }).toEqual({ missing: [], unknown: [] });
    },
  );

  it("README's YAML is valid, and every lora-router / lora-poller config in it passes the plugins' schema", () => {
    const configs: { plugin: string; config: unknown }[] = [];
    const visit = (x: unknown): void => {
      if (Array.isArray(x)) return x.forEach(visit);
      if (!x || typeof x !== 'object') return;
      const o = x as Record<string, unknown>;
      // decK names a plugin `name:`, a KongPlugin resource `plugin:`; both hold `config:`.
      const plugin = (o.plugin ?? o.name) as unknown;
      if ((plugin === 'lora-router' || plugin === 'lora-poller') && 'config' in o)
        configs.push({ plugin, config: o.config });
      Object.values(o).forEach(visit);
    };
    const yamls = blocks(readme).filter((b) => b.lang === 'yaml');
    expect(yamls.length).toBeGreaterThanOrEqual(2);
    for (const b of yamls)
      for (const doc of parseAllDocuments(b.body)) {
        expect(doc.errors).toEqual([]);
        visit(doc.toJS());
      }
    expect(configs.map((c) => c.plugin).sort()).toEqual([
      'lora-poller',
      'lora-poller',
      'lora-router',
      'lora-router',
    ]);
    for (const c of configs) {
      const parse = c.plugin === 'lora-router' ? parseRouterConfig : parsePollerConfig;
      expect(() => parse(c.config)).not.toThrow();
    }
  });

  it("README's kong.conf lines are those of the files the Docker image and the tests run", () => {
    const conf = (file: string) =>
      new Set(
        read(file)
          .split('\n')
          .map((l) => l.trim()),
      );
    const [v39, v38] = blocks(readme)
      .filter((b) => b.lang === '' && /^pluginserver_names/m.test(b.body))
      .map((b) => b.body.split('\n').filter(Boolean));
    expect(v39!.filter((l) => !conf('docker/kong-3.9.conf').has(l))).toEqual([]);
    expect(v38!.filter((l) => !conf('docker/kong.conf').has(l))).toEqual([]);
    expect(v39).toContain('pluginserver_names = lora_router,lora_poller');
    expect(v38).toContain('pluginserver_names = lora');
  });

  it('the quick start shows exactly the two set-up commands', () => {
    expect(readme).toContain('npm ci && npm start');
    expect(readme).toContain('npm ci && npm test');
  });

  it('`npm start -- --help` exits 0 and lists the options README relies on', async () => {
    const { stdout } = await run('npm', ['start', '--silent', '--', '--help'], {
      cwd: ROOT,
      timeout: 60_000,
    });
    expect(stdout).toMatch(/--port N/);
    expect(stdout).toMatch(/--replicas LIST/);
  }, 90_000);

  describe('the quick start against a stack on free loopback ports', () => {
    let stack: ChildProcess | undefined;
    let out = '';
    afterAll(async () => {
      if (!stack) return;
      // 'close': the process has exited and its output pipes are closed too.
      const closed = new Promise((r) => stack!.once('close', r));
      if (stack.exitCode === null && stack.signalCode === null) stack.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([closed, new Promise((r) => (timer = setTimeout(r, 10_000)))]);
      clearTimeout(timer);
    });

    /** The curl commands of README's quick start, continuation lines joined. */
    function quickStartCurls(): string[] {
      const start = readme.search(/^## Quick start/m);
      expect(start).toBeGreaterThan(0);
      const section = readme.slice(start, readme.indexOf('\n## ', start + 1));
      const cmds = lines(section)
        .filter((l) => l.code && !/^\s*```/.test(l.text))
        .map((l) => l.text)
        .join('\n')
        .replace(/\\\n\s*/g, '')
        .split('\n')
        .map((l) => l.replace(/\s+#.*$/, '').trim())
        .filter((l) => l.startsWith('curl '));
      return cmds;
    }

    it('every curl command of the quick start answers 200', async () => {
      const curls = quickStartCurls();
      expect(curls.length).toBeGreaterThanOrEqual(3);
      stack = spawn(process.execPath, ['dist/stack/cli.js', '--port', '0', '--fleet-port', '0'], {
        cwd: ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      stack.stdout!.on('data', (c: Buffer) => (out += c.toString()));
      stack.stderr!.on('data', (c: Buffer) => (out += c.toString()));
      await waitFor(
        () => /Ctrl-C stops everything/.test(out) || stack!.exitCode !== null,
        30_000,
        'the stack started',
      );
      const port = /gateway\s+http:\/\/127\.0\.0\.1:(\d+)/.exec(out)?.[1];
      expect(port).toBeDefined();
      const answers: string[] = [];
      for (const cmd of curls) {
        // README says localhost:8000; the stack here listens on a free port.
        const local = cmd.replace(/(https?:\/\/)?localhost:8000/g, `http://127.0.0.1:${port}`);
        expect(local).not.toBe(cmd);
        const { stdout } = await run(
          'bash',
          ['-c', `${local} -o /dev/null -w '%{http_code}' --max-time 30`],
          {
            timeout: 40_000,
          },
        );
        answers.push(`${stdout} ${cmd.slice(0, 80)}`);
      }
      expect(answers.filter((a) => !a.startsWith('200 '))).toEqual([]);
    }, 120_000);
  });

  it('the checks see what they check: a broken link, a missing file and an unknown script are found', () => {
    const page = [
      '[x](docs/nowhere.md)',
      '[y](#no-such-heading)',
      '`docker/no-such-file`',
      '`npm run no-such-script` and `npm run build:runtime`:',
      'a [link that\nwraps](docs/wrapped.md), and `[code](not-a-link.md)`',
      '```\n[in a block](not-a-link.md)\n```',
    ].join('\n\n');
    expect(links(page)).toEqual(['docs/nowhere.md', '#no-such-heading', 'docs/wrapped.md']);
    expect(anchors('# A `b` (c)\n## A b c\n')).toEqual(new Set(['a-b-c', 'a-b-c-1']));
    expect(paths(page)).toEqual(['docker/no-such-file']);
    expect(npmCommands(page)).toEqual([
      { run: true, name: 'no-such-script' },
      { run: true, name: 'build:runtime' },
    ]);
  });
});
