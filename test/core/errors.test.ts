import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { CATALOGUE, errors, errorsDoc, type ErrorCode } from '../../src/errors';
import { prettier } from '../helpers/prettier';

const ROOT = join(__dirname, '..', '..');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

describe('the error catalogue', () => {
  it('is the only place a client-facing error is built (src/errors.ts)', () => {
    const inline = [...sources(join(ROOT, 'src')), ...sources(join(ROOT, 'plugins'))]
      .filter((p) => relative(ROOT, p) !== join('src', 'errors.ts'))
      .filter((p) =>
        /new RouterError\(|'(invalid_request_error|server_error|permission_error)'/.test(
          readFileSync(p, 'utf8'),
        ),
      )
      .map((p) => relative(ROOT, p));
    expect(inline).toEqual([]);
  });
});

describe('docs/errors.md', () => {
  it('lists every catalogued code with its status, type and Retry-After (`npm run docs`)', () => {
    const doc = readFileSync(join(ROOT, 'docs', 'errors.md'), 'utf8');
    expect(doc).toBe(prettier(errorsDoc(), join(ROOT, 'docs', 'errors.md')));
    for (const [code, e] of Object.entries(CATALOGUE))
      expect(doc).toMatch(
        new RegExp(`\\| \`${code}\` +\\| ${e.status} +\\| \`${e.type}\` +\\| ${e.retryAfter ? 'yes' : ' '}`),
      );
  });

  it('says Retry-After exactly for the codes whose errors carry it', () => {
    const made = [
      errors.noRoom('a', 'http://r:1', 2),
      errors.backingOff('a', 'http://r:1', 2, 'x'),
      errors.coldLoadBudget('a', 'fleet', 2),
      errors.noReplica('a'),
      errors.internal(),
      errors.notFound('/x'),
      errors.bodyUnreadable(),
      errors.misconfigured('x'),
      errors.methodNotAllowed('PUT', ['GET']),
    ];
    for (const e of made) {
      const entry = CATALOGUE[e.code as ErrorCode];
      expect([e.code, e.status, e.type, 'Retry-After' in e.headers()]).toEqual([
        e.code,
        entry.status,
        entry.type,
        entry.retryAfter,
      ]);
    }
  });
});
