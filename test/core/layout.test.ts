/**
 * The layout's import rules (DEVELOPERS.md), as eslint.config.mjs's `no-restricted-imports`
 * enforces them: the tools (stack/, bench/, chaos/, dst/, sim/) and harness/ never import from test/;
 * what Kong runs (plugins/, pluginserver/, src/) imports neither harness/ nor the tools. Checked
 * by ESLint itself in a process of its own, on probe sources and on the checkout.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');

interface Probe {
  /** Where the source claims to live, from the repository root. */
  file: string;
  from: string;
}

/** The `no-restricted-imports` messages for each probe, then for the checkout's own folders. */
function lint(probes: Probe[]): { probes: string[][]; tree: string[] } {
  const script = `
    const { ESLint } = require('eslint');
    const { join } = require('node:path');
    const probes = JSON.parse(process.argv[1]);
    const restricted = (r) => r.flatMap((f) =>
      f.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => f.filePath + ': ' + m.message));
    (async () => {
      const eslint = new ESLint({ cwd: process.cwd() });
      const out = { probes: [], tree: [] };
      for (const p of probes) {
        const text = "import { x } from '" + p.from + "';\\nexport const y = x;\\n";
        out.probes.push(restricted(await eslint.lintText(text, { filePath: join(process.cwd(), p.file) })));
      }
      out.tree = restricted(
        await eslint.lintFiles(['stack', 'bench', 'chaos', 'dst', 'sim', 'harness', 'plugins', 'pluginserver', 'src']),
      );
      process.stdout.write(JSON.stringify(out));
    })();
  `;
  const r = spawnSync(process.execPath, ['-e', script, JSON.stringify(probes)], {
    cwd: ROOT,
    timeout: 60_000,
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`eslint failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

const REFUSED: Probe[] = [
  { file: 'stack/probe.ts', from: '../test/kong/driver' },
  { file: 'bench/parts/probe.ts', from: '../../test/helpers/log' },
  { file: 'chaos/probe.ts', from: '../test/kong/world' },
  { file: 'dst/probe.ts', from: '../test/helpers/log' },
  { file: 'src/fleet/probe.ts', from: '../../dst/world' },
  { file: 'sim/http/probe.ts', from: '../../test/helpers/replicas' },
  { file: 'harness/kong/probe.ts', from: '../../test/kong/world' },
  { file: 'src/router/probe.ts', from: '../../harness/kong/driver' },
  { file: 'plugins/probe.ts', from: '../harness/redis/server' },
  { file: 'pluginserver/probe.ts', from: '../stack/gateway' },
  { file: 'src/probe.ts', from: '../test/helpers/log' },
];
const ALLOWED: Probe[] = [
  { file: 'stack/probe.ts', from: '../harness/kong/driver' },
  { file: 'bench/parts/probe.ts', from: '../../harness/redis/server' },
  { file: 'chaos/probe.ts', from: '../harness/net/tcp-proxy' },
  { file: 'dst/probe.ts', from: '../chaos/invariants' },
  { file: 'harness/kong/probe.ts', from: '../../src/config/parse' },
  { file: 'src/router/probe.ts', from: '../fleet/store' },
];

it('refuses an import from test/ in the tools and harness/, and of harness/ or a tool in what Kong runs', () => {
  const result = lint([...REFUSED, ...ALLOWED]);
  const refused = result.probes.slice(0, REFUSED.length);
  const allowed = result.probes.slice(REFUSED.length);
  REFUSED.forEach((p, i) => expect([p.file, refused[i]!.length]).toEqual([p.file, 1]));
  ALLOWED.forEach((p, i) => expect([p.file, allowed[i]]).toEqual([p.file, []]));
  // And the checkout keeps the rules.
  expect(result.tree).toEqual([]);
});

it('builds harness/ for the tools and tests, never into the package Kong installs', () => {
  const include = (f: string): string[] => JSON.parse(readFileSync(join(ROOT, f), 'utf8')).include;
  expect(include('tsconfig.build.json')).toContain('harness');
  expect(include('tsconfig.json')).toContain('harness'); // type-check and ts-jest
  expect(include('tsconfig.runtime.json')).toEqual(['plugins', 'pluginserver', 'src']);
});
