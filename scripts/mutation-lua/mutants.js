// The Lua mutants of one script module (src/fleet/redis/scripts/*.ts): the Lua is the text of the
// module's template literals (their `${...}` parts are TypeScript, left alone), tokenized well
// enough to skip Lua strings and comments; one mutant per site. Used by scripts/mutation-lua.js
// and test/core/lua-mutants.test.ts.

/** Redis commands that change the state: a statement that is one of these calls may be dropped. */
const WRITES = new Set(
  (
    'SET DEL HSET HDEL HINCRBY SADD SREM ZADD ZREM ZREMRANGEBYSCORE ZREMRANGEBYRANK INCR INCRBY ' +
    'EXPIRE PEXPIRE PUBLISH LPUSH LTRIM'
  ).split(' '),
);
/** The prelude's helpers that write (prelude.ts): a statement calling one may be dropped too. */
const WRITING_HELPERS = new Set(
  'putres dropres droplease lock unlock unlockstale changed event pushevent markgone gone touch outcome'.split(
    ' ',
  ),
);
const RELATIONAL = { '<': '<=', '<=': '<', '>': '>=', '>=': '>', '==': '~=', '~=': '==' };
const KEYWORDS = new Set(
  (
    'and break do else elseif end false for function goto if in local nil not or repeat return then ' +
    'true until while'
  ).split(' '),
);
/** Tokens after which a call starts a statement (not part of an expression). */
const STATEMENT_BEFORE = new Set(['then', 'else', 'do', 'end', ')', ']', '}']);
/** Whether a token ends an operand (so a `+` or `-` after it is binary, not a sign). */
function endsOperand(t) {
  if (!t) return false;
  if (t.kind === 'name' || t.kind === 'number' || t.kind === 'string') return true;
  if (t.kind === 'keyword') return ['nil', 'true', 'false'].includes(t.text);
  return [')', ']', '}'].includes(t.text);
}

/**
 * The TypeScript template literals of a module, as Lua segments [start, end, afterValue] of the
 * source (the `${...}` parts cut out; afterValue: the segment follows one, a value in the Lua). Skips TypeScript comments and quoted strings; nested templates inside an
 * interpolation are not expected (the script modules interpolate names only).
 */
function luaSegments(ts) {
  const segments = [];
  let i = 0;
  while (i < ts.length) {
    const c = ts[i];
    if (c === '/' && ts[i + 1] === '/') i = lineEnd(ts, i);
    else if (c === '/' && ts[i + 1] === '*') i = ts.indexOf('*/', i + 2) + 2;
    else if (c === "'" || c === '"') i = quoteEnd(ts, i, c);
    else if (c === '`') {
      let start = i + 1;
      const templateStart = start;
      i++;
      while (i < ts.length && ts[i] !== '`') {
        if (ts[i] === '\\') i += 2;
        else if (ts[i] === '$' && ts[i + 1] === '{') {
          segments.push([start, i, start !== templateStart]);
          i = ts.indexOf('}', i) + 1;
          start = i;
        } else i++;
      }
      segments.push([start, i, start !== templateStart]);
      i++;
    } else i++;
  }
  return segments.filter(([s, e]) => e > s);
}

function lineEnd(s, i) {
  const n = s.indexOf('\n', i);
  return n < 0 ? s.length : n;
}

function quoteEnd(s, i, q) {
  let j = i + 1;
  while (j < s.length && s[j] !== q && s[j] !== '\n') j += s[j] === '\\' ? 2 : 1;
  return j + 1;
}

/** `[[`, `[=[`...: the long bracket's level, or -1. */
function longBracket(s, i) {
  if (s[i] !== '[') return -1;
  let j = i + 1;
  while (s[j] === '=') j++;
  return s[j] === '[' ? j - i - 1 : -1;
}

function longEnd(s, i, level) {
  const close = ']' + '='.repeat(level) + ']';
  const n = s.indexOf(close, i);
  return n < 0 ? s.length : n + close.length;
}

/**
 * Lua tokens of [start, end) of `src`: {kind: 'name'|'keyword'|'number'|'string'|'op', text, at}
 * (at: offset in src). Comments are dropped; strings are one token, never looked into.
 */
function tokenize(src, start = 0, end = src.length) {
  const out = [];
  let i = start;
  while (i < end) {
    const c = src[i];
    if (/\s/.test(c)) {
      i++;
    } else if (c === '-' && src[i + 1] === '-') {
      const level = longBracket(src, i + 2);
      i = level >= 0 ? longEnd(src, i + 2, level) : lineEnd(src, i);
    } else if (c === "'" || c === '"') {
      const j = Math.min(quoteEnd(src, i, c), end);
      out.push({ kind: 'string', text: src.slice(i, j), at: i });
      i = j;
    } else if (longBracket(src, i) >= 0) {
      const j = Math.min(longEnd(src, i, longBracket(src, i)), end);
      out.push({ kind: 'string', text: src.slice(i, j), at: i });
      i = j;
    } else if (/[A-Za-z_]/.test(c)) {
      const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(src.slice(i, end));
      out.push({ kind: KEYWORDS.has(m[0]) ? 'keyword' : 'name', text: m[0], at: i });
      i += m[0].length;
    } else if (/[0-9]/.test(c) || (c === '.' && /[0-9]/.test(src[i + 1] ?? ''))) {
      const m = /^(0[xX][0-9a-fA-F]+|[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)/.exec(src.slice(i, end));
      out.push({ kind: 'number', text: m[0], at: i });
      i += m[0].length;
    } else {
      const three = src.slice(i, i + 3);
      const two = src.slice(i, i + 2);
      const text =
        three === '...' ? three : ['==', '~=', '<=', '>=', '..', '::', '//'].includes(two) ? two : c;
      out.push({ kind: 'op', text, at: i });
      i += text.length;
    }
  }
  return out;
}

/** The index of the token closing the bracket opened at tokens[open]. */
function closing(tokens, open) {
  const pair = { '(': ')', '{': '}', '[': ']' }[tokens[open].text];
  let depth = 0;
  for (let k = open; k < tokens.length; k++) {
    if (tokens[k].text === tokens[open].text) depth++;
    else if (tokens[k].text === pair && --depth === 0) return k;
  }
  return -1;
}

/** Whether tokens[k] begins a statement: after a block keyword or a finished expression on an earlier line. */
function startsStatement(src, tokens, k) {
  const prev = tokens[k - 1];
  if (!prev) return true;
  if (STATEMENT_BEFORE.has(prev.text) && prev.kind !== 'string') {
    return ['then', 'else', 'do'].includes(prev.text) || src.slice(prev.at, tokens[k].at).includes('\n');
  }
  // A name, number or string ends an expression: a call on a later line is a new statement.
  return ['name', 'number', 'string'].includes(prev.kind) && src.slice(prev.at, tokens[k].at).includes('\n');
}

function lineOf(src, at) {
  let n = 1;
  for (let i = 0; i < at; i++) if (src.charCodeAt(i) === 10) n++;
  return n;
}

/**
 * The mutants of a script module's source: [{line, start, end, replacement, kind, description}],
 * `start`/`end` offsets in `ts`. Apply one with `apply`.
 */
function mutants(ts) {
  const out = [];
  const add = (start, end, replacement, kind) => {
    const was = ts.slice(start, end).replace(/\s+/g, ' ');
    const now = replacement.replace(/\s+/g, ' ');
    const shown = (s) => (s.length > 60 ? s.slice(0, 57) + '...' : s);
    out.push({
      line: lineOf(ts, start),
      start,
      end,
      replacement,
      kind,
      description: `${shown(was)} -> ${now === '' ? '(removed)' : shown(now)}`,
    });
  };
  for (const [s, e, afterValue] of luaSegments(ts)) {
    const tokens = tokenize(ts, s, e);
    for (let k = 0; k < tokens.length; k++) {
      const t = tokens[k];
      // An interpolated value (`${FENCE_PER_MS}`) stands before the segment's first token.
      const prev = tokens[k - 1] ?? (afterValue ? { kind: 'name', text: '${}', at: s } : undefined);
      if (t.kind === 'op' && RELATIONAL[t.text]) {
        add(t.at, t.at + t.text.length, RELATIONAL[t.text], 'relational');
      } else if (t.kind === 'op' && (t.text === '+' || t.text === '-')) {
        // Binary only: a unary minus (a negative constant) is the constant's.
        if (endsOperand(prev)) {
          add(t.at, t.at + 1, t.text === '+' ? '-' : '+', 'arithmetic');
        }
      } else if (t.kind === 'keyword' && (t.text === 'and' || t.text === 'or')) {
        add(t.at, t.at + t.text.length, t.text === 'and' ? 'or' : 'and', 'boolean');
      } else if (t.kind === 'keyword' && t.text === 'not') {
        add(t.at, tokens[k + 1].at, '', 'negation');
      } else if (t.kind === 'number') {
        const v = Number(t.text);
        if (Number.isFinite(v)) add(t.at, t.at + t.text.length, String(v + 1), 'constant');
      } else if ((t.text === 'if' || t.text === 'elseif') && t.kind === 'keyword') {
        // `if COND then` -> `if true then` and `if false then` (always / never taken).
        let then = k + 1;
        let depth = 0;
        while (then < tokens.length && !(depth === 0 && tokens[then].text === 'then')) {
          if ('([{'.includes(tokens[then].text) && tokens[then].kind === 'op') depth++;
          if (')]}'.includes(tokens[then].text) && tokens[then].kind === 'op') depth--;
          then++;
        }
        if (then < tokens.length && then > k + 1) {
          const from = tokens[k + 1].at;
          const to = tokens[then - 1].at + tokens[then - 1].text.length;
          add(from, to, 'true', 'condition');
          add(from, to, 'false', 'condition');
        }
      }
      // A write statement dropped: `redis.call('HSET', ...)` or a writing helper's call.
      const isRedisWrite =
        t.text === 'redis' &&
        tokens[k + 1]?.text === '.' &&
        tokens[k + 2]?.text === 'call' &&
        tokens[k + 3]?.text === '(' &&
        tokens[k + 4]?.kind === 'string' &&
        WRITES.has(tokens[k + 4].text.slice(1, -1).toUpperCase());
      const isHelperWrite =
        t.kind === 'name' &&
        WRITING_HELPERS.has(t.text) &&
        tokens[k + 1]?.text === '(' &&
        prev?.text !== 'function';
      if ((isRedisWrite || isHelperWrite) && startsStatement(ts, tokens, k)) {
        const open = isRedisWrite ? k + 3 : k + 1;
        const close = closing(tokens, open);
        if (close > 0) add(t.at, tokens[close].at + 1, '', 'write-dropped');
      }
    }
  }
  return out;
}

/** The module's source with one mutant applied. */
function apply(ts, m) {
  return ts.slice(0, m.start) + m.replacement + ts.slice(m.end);
}

module.exports = { luaSegments, tokenize, mutants, apply };
