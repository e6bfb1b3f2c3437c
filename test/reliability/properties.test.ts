/**
 * Property-based tests of everything that reads client input before a replica is contacted:
 * any input yields a decision or a 4xx RouterError in OpenAI's format, and no adapter name
 * resolves to a path outside the template's root.
 */
import fc from 'fast-check';
import { posix } from 'node:path';
import { AdapterCatalog, DEFAULT_NAME_PATTERN } from '../../src/adapters/catalog';
import { RouterError } from '../../src/errors';
import { classifyPath, parseBody } from '../../src/router/request';

const RUNS = 2000;
const catalog = new AdapterCatalog({
  baseModel: 'base',
  adapters: [{ name: 'listed', path: '/adapters/listed', static: false }],
  pathTemplate: '/adapters/{name}',
  namePattern: DEFAULT_NAME_PATTERN,
});
const permissive = new AdapterCatalog({
  adapters: [],
  pathTemplate: '/srv/loras/{name}/weights',
  namePattern: '.*',
});

/** Runs `fn`: it must return, or throw a RouterError with a 4xx status and an OpenAI-format body. */
function decidesOr4xx(fn: () => unknown): unknown {
  try {
    return fn();
  } catch (e) {
    expect(e).toBeInstanceOf(RouterError);
    const err = e as RouterError;
    expect(err.status).toBeGreaterThanOrEqual(400);
    expect(err.status).toBeLessThan(500);
    const body = err.body();
    expect(Object.keys(body.error).sort()).toEqual(['code', 'message', 'type']);
    expect(typeof body.error.message).toBe('string');
    expect(JSON.parse(JSON.stringify(body))).toEqual(body);
    return undefined;
  }
}

const jsonish = fc.oneof(
  fc.string(),
  fc.json(),
  fc.jsonValue().map((v) => JSON.stringify(v)),
  fc
    .record({
      model: fc.oneof(fc.string(), fc.integer(), fc.constant(null), fc.array(fc.string())),
      messages: fc.anything(),
    })
    .map((v) => JSON.stringify(v)),
  fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b).toString('latin1')),
  fc.string().map((s) => s.slice(0, Math.floor(s.length / 2))), // truncated
);

describe('body parsing, any input', () => {
  it('gives a parsed body or a 4xx JSON error; a model, when read, is a string', () => {
    fc.assert(
      fc.property(
        jsonish,
        fc.constantFrom('inference', 'other', 'models') as fc.Arbitrary<'inference' | 'other' | 'models'>,
        (body, cls) => {
          const r = decidesOr4xx(() => parseBody(Buffer.from(body, 'utf8'), cls, 10_000)) as
            | ReturnType<typeof parseBody>
            | undefined;
          if (r?.model !== undefined) expect(typeof r.model).toBe('string');
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('refuses bodies over the limit, and unreadable ones, with 413', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5000 }), (n) => {
        const e = (() => {
          try {
            parseBody('x'.repeat(n + 100), 'inference', n);
          } catch (err) {
            return err as RouterError;
          }
        })();
        expect(e?.status).toBe(413);
      }),
      { numRuns: 200 },
    );
    // A body the gateway could not hand over (spooled past the buffer): 413 with its reason.
    for (const unreadable of [undefined, null]) {
      const e = (() => {
        try {
          parseBody(unreadable, 'inference', 10);
        } catch (err) {
          return err as RouterError;
        }
      })();
      expect(e).toBeInstanceOf(RouterError);
      expect([e!.status, e!.body().error.code]).toEqual([413, 'request_too_large']);
    }
  });
});

describe('adapter names and paths, any input', () => {
  const names = fc.oneof(
    fc.string({ maxLength: 300 }),
    fc.string({
      unit: fc.constantFrom('a', '.', '/', '\\', '\u0000', '%', '-', '_', '1', ' ', '~'),
      maxLength: 40,
    }),
    fc.constantFrom(
      '..',
      '../etc/passwd',
      '..%2f..%2fetc',
      'a/../../b',
      '/abs',
      'a\u0000b',
      '.',
      '.hidden',
      'con',
      'x'.repeat(129),
    ),
  );

  it('resolves to base, an adapter under the root, or a 4xx', () => {
    fc.assert(
      fc.property(names, (name) => {
        for (const c of [catalog, permissive]) {
          const r = decidesOr4xx(() => c.resolve(name)) as ReturnType<AdapterCatalog['resolve']> | undefined;
          if (!r || r.kind === 'base' || r.adapter.path === undefined) continue;
          const path = r.adapter.path;
          const root = c === catalog ? '/adapters/' : '/srv/loras/';
          expect(posix.normalize(path)).toBe(path);
          expect(path.startsWith(root)).toBe(true);
          expect(path.split('/')).not.toContain('..');
          expect(path.includes('\u0000')).toBe(false);
        }
      }),
      { numRuns: RUNS },
    );
  });

  it('never lets a name with a path separator or .. through the default pattern', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 60 }), (s) => {
        const name = `${s}/${s}`;
        expect(decidesOr4xx(() => catalog.resolve(name))).toBeUndefined();
      }),
      { numRuns: 500 },
    );
  });
});

describe('path classification, any input', () => {
  it('classifies every path, and any path naming a replica admin route is admin', () => {
    const admin = fc.constantFrom(
      '/v1/load_lora_adapter',
      '/v1/unload_lora_adapter',
      '/lora-adapters',
      '/_sim/fault',
      '/slots',
    );
    fc.assert(
      fc.property(
        fc.string({ maxLength: 30 }).map((p) => p.replace(/[?#]/g, '')),
        admin,
        fc.constantFrom('', '/', '//'),
        (prefix, route, slash) => {
          // Any route prefix, then the admin route, joined by one or more slashes.
          const pre = (prefix.startsWith('/') ? prefix : `/${prefix}`).replace(/\/+$/, '');
          const path = pre + slash + route;
          expect(classifyPath(path)).toBe('admin');
          expect(classifyPath(path.toUpperCase())).toBe('admin');
        },
      ),
      { numRuns: RUNS },
    );
  });
});
