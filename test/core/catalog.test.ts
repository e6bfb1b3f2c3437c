import { AdapterCatalog, DEFAULT_NAME_PATTERN } from '../../src/adapters/catalog';
import { routerSchema } from '../../src/config/router-schema';
import { RouterError } from '../../src/errors';

const catalog = (template?: string) =>
  new AdapterCatalog({
    baseModel: 'base',
    adapters: [
      { name: 'sql', path: '/adapters/sql', static: false },
      { name: 'pinned', path: '/adapters/pinned', static: true },
    ],
    pathTemplate: template,
    namePattern: DEFAULT_NAME_PATTERN,
  });

function refused(fn: () => unknown): RouterError {
  try {
    fn();
  } catch (e) {
    return e as RouterError;
  }
  throw new Error('not refused');
}

describe('AdapterCatalog', () => {
  it('resolves the base model, registered, static and templated adapters', () => {
    const c = catalog('/adapters/{name}');
    expect(c.resolve('base')).toEqual({ kind: 'base' });
    expect(c.resolve(undefined)).toEqual({ kind: 'base' });
    expect(c.resolve('sql')).toEqual({ kind: 'on-demand', adapter: { name: 'sql', path: '/adapters/sql' } });
    expect(c.resolve('pinned')).toEqual({
      kind: 'static',
      adapter: { name: 'pinned', path: '/adapters/pinned' },
    });
    expect(c.resolve('cust-42_v1.2')).toEqual({
      kind: 'on-demand',
      adapter: { name: 'cust-42_v1.2', path: '/adapters/cust-42_v1.2' },
    });
  });

  it('without a template, takes an unlisted well-formed name as one a replica may have registered at start', () => {
    expect(catalog().resolve('other')).toEqual({
      kind: 'static',
      adapter: { name: 'other' },
      discovered: true,
    });
    expect(refused(() => catalog().resolve('../x')).status).toBe(400);
  });

  it.each([
    '../etc/passwd',
    'a/../../x',
    '..',
    '.',
    'a/b',
    'a\\b',
    'x\u0000y',
    'x'.repeat(300),
    '-leading-dash',
    'sp ace',
    '%2e%2e',
  ])('refuses %j with 400 before any replica is contacted', (name) => {
    const e = refused(() => catalog('/adapters/{name}').resolve(name));
    expect([e.status, e.code]).toEqual([400, 'invalid_model']);
  });

  it('keeps templated paths under the root even with a permissive pattern', () => {
    const c = new AdapterCatalog({
      adapters: [],
      pathTemplate: '/adapters/{name}/weights',
      namePattern: '.*',
    });
    expect(c.resolve('ok').kind).toBe('on-demand');
    for (const bad of ['..', '../x', 'a/../../b', '/abs'])
      expect(refused(() => c.resolve(bad)).status).toBe(400);
  });

  it('knows which registry entries a configuration manages (could have loaded itself)', () => {
    const c = catalog('/adapters/{name}');
    expect(c.manages('sql', '/anything')).toBe(true); // listed on-demand
    expect(c.manages('pinned', '/adapters/pinned')).toBe(false); // listed static
    expect(c.manages('cust-1', '/adapters/cust-1')).toBe(true); // the template's path
    expect(c.manages('cust-1', '/elsewhere/cust-1')).toBe(false); // same name, another path
    expect(c.manages('../x', '/adapters/../x')).toBe(false);
    expect(catalog().manages('cust-1', '/adapters/cust-1')).toBe(false); // no template
  });
});

describe('base_model: what its description says is what it does', () => {
  const field = routerSchema.find((f) => 'base_model' in f)!.base_model!;
  const unset = (template?: string) =>
    new AdapterCatalog({ adapters: [], pathTemplate: template, namePattern: DEFAULT_NAME_PATTERN });

  it('set: a request naming it or no model is a base-model request', () => {
    expect(catalog().resolve('base')).toEqual({ kind: 'base' });
    expect(catalog().resolve(undefined)).toEqual({ kind: 'base' });
    expect(field.description).toMatch(/A request naming it, or naming no `model`, is a base-model request/);
  });

  it("unset: only a request with no model is; the base model's id is taken for an adapter name", () => {
    expect(unset().resolve(undefined)).toEqual({ kind: 'base' });
    expect(refused(() => unset().resolve('meta-llama/Llama-3.1-8B-Instruct')).code).toBe('invalid_model');
    expect(unset('/adapters/{name}').resolve('Llama-3.1-8B')).toMatchObject({ kind: 'on-demand' });
    expect(field.description).toMatch(/Unset: only a request with no `model` is one/);
    expect(field.description).toMatch(/400 `invalid_model` when it contains `\/`/);
  });
});
