// Resolves the script module under mutation (LUA_MUTANT_TARGET) to its mutated copy
// (LUA_MUTANT_FILE), and the copy's own relative imports as if it stood where the original does.
const { dirname } = require('node:path');

module.exports = (request, options) => {
  const target = process.env.LUA_MUTANT_TARGET;
  const file = process.env.LUA_MUTANT_FILE;
  if (!target || !file) return options.defaultResolver(request, options);
  const basedir = options.basedir === dirname(file) ? dirname(target) : options.basedir;
  const resolved = options.defaultResolver(request, { ...options, basedir });
  return resolved === target ? file : resolved;
};
