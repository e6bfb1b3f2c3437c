/**
 * AdapterCatalog alone (src/adapters/catalog.ts): the survivors of `npm run mutation:safety --
 * catalog` (docs/reliability/mutation-testing.md). Which names are static or listed (a static
 * adapter is never a victim), the name checks with a pattern that would allow anything, the
 * defence in depth that keeps a templated path under its root whatever the template, the
 * resolutions remembered, and the name as echoed in the 400's text (printable, cut at 64).
 */
import { AdapterCatalog, DEFAULT_NAME_PATTERN } from '../../src/adapters/catalog';
import { RouterError } from '../../src/errors';

const ADAPTERS = [
  { name: 'sql', path: '/adapters/sql', static: false },
  { name: 'pinned', path: '/adapters/pinned', static: true },
];

const catalog = (pathTemplate?: string, namePattern = DEFAULT_NAME_PATTERN, baseModel?: string) =>
  new AdapterCatalog({ baseModel, adapters: ADAPTERS, pathTemplate, namePattern });

function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(RouterError);
    return (e as RouterError).message;
  }
  throw new Error('not refused');
}

describe('AdapterCatalog: what the configuration lists', () => {
  it('static and listed, by name', () => {
    const c = catalog('/adapters/{name}');
    expect(['sql', 'pinned', 'other'].map((n) => c.isStatic(n))).toEqual([false, true, false]);
    expect(['sql', 'pinned', 'other'].map((n) => c.isListed(n))).toEqual([true, true, false]);
    expect(c.registered()).toEqual(ADAPTERS);
  });

  it('a template without {name} is refused at configuration', () => {
    expect(() => catalog('/adapters/x')).toThrow('adapter_path_template must contain {name}');
  });

  it('an empty model is the base model, whether one is named or not', () => {
    for (const base of [undefined, 'base'])
      expect(catalog(undefined, undefined, base).resolve('')).toEqual({ kind: 'base' });
  });

  it('a templated name resolved again gives the same path, as a remembered resolution', () => {
    const c = catalog('/adapters/{name}');
    const first = c.resolve('x');
    expect(c.resolve('x')).toEqual(first);
    expect(first).toEqual({ kind: 'on-demand', adapter: { name: 'x', path: '/adapters/x' } });
  });

  it('without a template, a name resolved again is still discovered, and a refused one still refused', () => {
    const c = catalog();
    for (let i = 0; i < 2; i++) {
      expect(c.resolve('x')).toEqual({ kind: 'static', adapter: { name: 'x' }, discovered: true });
      expect(refusal(() => c.resolve('-x'))).toContain('it must match');
    }
  });
});

describe('AdapterCatalog: names refused whatever the pattern allows', () => {
  // No template: the name check alone stands between a name and the replica.
  const open = () => catalog(undefined, '.*');

  it.each(['a/b', 'a\\b', 'a\0b', '.', '..', 'a..b'])('%j', (name) => {
    expect(refusal(() => open().resolve(name))).toContain("it may not contain '/', '\\', '..' or NUL.");
  });

  it('at most 256 characters', () => {
    expect(open().resolve('n'.repeat(256))).toMatchObject({ kind: 'static', discovered: true });
    expect(refusal(() => open().resolve('n'.repeat(257)))).toContain('may not contain');
  });

  it('a name the pattern refuses says which pattern', () => {
    expect(refusal(() => catalog().resolve('-x'))).toContain(`it must match ${DEFAULT_NAME_PATTERN}.`);
  });
});

describe('AdapterCatalog: a templated path stays under its root', () => {
  it('a template that leaves its root refuses every name', () => {
    const c = catalog('/adapters/{name}/../../etc');
    expect(refusal(() => c.resolve('x'))).toBe("Invalid adapter name 'x'.");
    expect(c.manages('x', '/etc')).toBe(false);
  });

  it("a path with a '..' segment is refused, even under a root that has one", () => {
    const c = catalog('../adapters/{name}');
    expect(refusal(() => c.resolve('x'))).toBe("Invalid adapter name 'x'.");
  });
});

describe('AdapterCatalog: the name as the 400 shows it', () => {
  const shown = (name: string) =>
    /^Invalid adapter name '(.*)': it must match/s.exec(refusal(() => catalog().resolve(name)))![1];

  it('control characters and DEL as ?, spaces and the rest as they are', () => {
    expect(shown('-a\nb\u007fc d\u0001')).toBe('-a?b?c d?');
  });

  it('cut at 64 characters, marked when cut', () => {
    expect(shown('-' + 'x'.repeat(63))).toBe('-' + 'x'.repeat(63));
    expect(shown('-' + 'x'.repeat(64))).toBe('-' + 'x'.repeat(63) + '…');
    expect(shown('-' + 'x'.repeat(200))).toBe('-' + 'x'.repeat(63) + '…');
  });
});
