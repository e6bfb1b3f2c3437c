/**
 * The Lua mutant generator of `npm run mutation:lua` (scripts/mutation-lua/mutants.js): it finds
 * the Lua in a script module's template literals, never mutates inside a Lua string or comment or
 * a `${...}` interpolation, and makes one mutant per site of each kind.
 */
interface Mutant {
  line: number;
  start: number;
  end: number;
  replacement: string;
  kind: string;
  description: string;
}
interface Token {
  kind: string;
  text: string;
  at: number;
}
const lua: {
  mutants(ts: string): Mutant[];
  apply(ts: string, m: Mutant): string;
  tokenize(src: string): Token[];
} = require('../../scripts/mutation-lua/mutants.js');

// A script module in miniature: TypeScript around one template literal, with an interpolation.
const MODULE = [
  "// not Lua: if a < b then redis.call('DEL', k) end",
  'export const S = {',
  '  /** nor this: n + 1 */',
  '  op: `',
  'local k = P .. \'a < b and not c -- 1\' .. "x >= 2"',
  "-- a comment: if n == 1 then redis.call('DEL', k) end",
  '--[[ a long comment: x ~= 3 ]]',
  "local n = redis.call('INCR', k) + 1",
  "if n <= tonumber(ARGV[3]) and not done then redis.call('DEL', k) end",
  "redis.call('HINCRBY', k, 'x', -1)",
  'changed()',
  'return n * ${LIMIT} - 2`,',
  "  name: 'if a < b then',",
  '};',
].join('\n');

const mutated = lua.mutants(MODULE);
const byKind = (kind: string): Mutant[] => mutated.filter((m) => m.kind === kind);

describe('Lua mutants of a script module', () => {
  test('only the Lua of template literals is mutated, never a Lua string, a comment or an interpolation', () => {
    const luaStart = MODULE.indexOf('`') + 1;
    const luaEnd = MODULE.lastIndexOf('`');
    const protectedSpans = [
      "'a < b and not c -- 1'",
      '"x >= 2"',
      "-- a comment: if n == 1 then redis.call('DEL', k) end",
      '--[[ a long comment: x ~= 3 ]]',
      "'x'",
      '${LIMIT}',
    ].map((s) => [MODULE.indexOf(s), MODULE.indexOf(s) + s.length]);
    for (const m of mutated) {
      expect(m.start).toBeGreaterThanOrEqual(luaStart);
      expect(m.end).toBeLessThanOrEqual(luaEnd);
      // A dropped statement may hold a string whole; no mutant begins or ends inside one.
      for (const [s, e] of protectedSpans) {
        expect(m.start > s! && m.start < e!).toBe(false);
        expect(m.end > s! && m.end < e!).toBe(false);
      }
    }
  });

  test('one mutant per site of each kind', () => {
    // `<=` on line 9.
    expect(byKind('relational').map((m) => m.description)).toEqual(['<= -> <']);
    // The `+ 1` of line 8 and the `- 2` of the return; the `-1` argument is a sign, not a subtraction.
    expect(byKind('arithmetic').map((m) => m.description)).toEqual(['+ -> -', '- -> +']);
    expect(byKind('boolean').map((m) => m.description)).toEqual(['and -> or']);
    expect(byKind('negation').map((m) => m.line)).toEqual([9]);
    // 1 (line 8), 3 (ARGV[3]), 1 (the -1 argument), 2 (the return).
    expect(byKind('constant').map((m) => m.description)).toEqual(['1 -> 2', '3 -> 4', '1 -> 2', '2 -> 3']);
    expect(byKind('condition').map((m) => m.description)).toEqual([
      'n <= tonumber(ARGV[3]) and not done -> true',
      'n <= tonumber(ARGV[3]) and not done -> false',
    ]);
    // The DEL after `then`, the HINCRBY and the changed() statements; the INCR is an expression.
    expect(byKind('write-dropped').map((m) => m.description)).toEqual([
      "redis.call('DEL', k) -> (removed)",
      "redis.call('HINCRBY', k, 'x', -1) -> (removed)",
      'changed() -> (removed)',
    ]);
    expect(mutated).toHaveLength(14);
  });

  test('a mutant changes the module at its site only', () => {
    const drop = byKind('negation')[0]!;
    const text = lua.apply(MODULE, drop);
    expect(text).toContain("if n <= tonumber(ARGV[3]) and done then redis.call('DEL', k) end");
    expect(text.replace('and done', 'and not done')).toBe(MODULE);
  });

  test('the tokenizer keeps strings whole and drops comments', () => {
    const tokens = lua.tokenize("local s = 'a -- b' -- c\nreturn [[x < y]] ~= s");
    expect(tokens.map((t) => t.text)).toEqual([
      'local',
      's',
      '=',
      "'a -- b'",
      'return',
      '[[x < y]]',
      '~=',
      's',
    ]);
  });
});
