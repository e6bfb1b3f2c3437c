import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

/**
 * Every relative link in the project's Markdown (README, docs/ and its sub-pages, the other READMEs)
 * reaches a file that exists, and a `#fragment` a heading of that page, as GitHub renders it: a
 * reader who follows a link from one page to another lands where the text says.
 */
const ROOT = join(__dirname, '..', '..');
const SKIP = new Set(['node_modules', 'dist', 'lib', '.git', 'reports', '.stryker-tmp', 'coverage']);

function markdownFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    if (SKIP.has(name)) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...markdownFiles(path));
    else if (name.endsWith('.md')) out.push(path);
  }
  return out;
}

/** The lines outside fenced code blocks (a link in a code sample is no link). */
function prose(text: string): string[] {
  let fenced = false;
  return text.split('\n').filter((line) => {
    if (/^\s*(```|~~~)/.test(line)) {
      fenced = !fenced;
      return false;
    }
    return !fenced;
  });
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of prose(text)) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = m[1]!
      .toLowerCase()
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .replace(/[^\p{L}\p{N}\- _]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** The relative links of a page (inline `[text](target)`; web addresses and mail left out). */
export function links(text: string): string[] {
  const out: string[] = [];
  for (const line of prose(text))
    for (const m of line.replace(/`[^`]*`/g, '').matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1]!;
      if (!/^[a-z][a-z0-9+.-]*:/i.test(target)) out.push(target);
    }
  return out;
}

describe('links between the project pages', () => {
  const files = markdownFiles(ROOT).filter((f) => !relative(ROOT, f).startsWith('changelog/'));

  it('finds the pages (README, docs and docs/reliability)', () => {
    const names = files.map((f) => relative(ROOT, f));
    expect(names).toEqual(
      expect.arrayContaining(['README.md', 'docs/reliability.md', 'docs/reliability/explored-schedules.md']),
    );
  });

  it('every relative link reaches a file, and every fragment a heading of it', () => {
    const broken: string[] = [];
    const cache = new Map<string, Set<string>>();
    const anchorsOf = (file: string) => {
      if (!cache.has(file)) cache.set(file, anchors(readFileSync(file, 'utf8')));
      return cache.get(file)!;
    };
    for (const file of files) {
      for (const target of links(readFileSync(file, 'utf8'))) {
        const [path, fragment] = target.split('#', 2) as [string, string | undefined];
        const dest = path === '' ? file : join(dirname(file), decodeURIComponent(path));
        const where = `${relative(ROOT, file)} -> ${target}`;
        if (!existsSync(dest)) broken.push(`${where}: no such file`);
        else if (fragment !== undefined && dest.endsWith('.md') && !anchorsOf(dest).has(fragment))
          broken.push(`${where}: no such heading`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('would see a link to a heading that is not there, and one that is', () => {
    const page = '# Title\n\n## The cold-load budget\n\n## `redis` record changes\n';
    expect(anchors(page)).toEqual(new Set(['title', 'the-cold-load-budget', 'redis-record-changes']));
    expect(links('see [x](a.md#b) and [y](https://e.org) and `[z](c.md)`')).toEqual(['a.md#b']);
  });
});
