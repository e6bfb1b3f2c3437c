// Preload for the plugin server the harness starts: kong-pdk 0.6.0's lib/mod.js calls
// require('ts-node').register() at load, for .ts plugins. The npm package and the Docker image
// bundle a stand-in whose register() does nothing (scripts/pack/ts-node); in this checkout the
// real ts-node (and TypeScript with it) loaded at every start, about 0.5 s of CPU each. This
// resolves 'ts-node' to the stand-in, so the harness starts the server as Kong's node runs it.
const Module = require('node:module');
const { join } = require('node:path');

const standIn = require.resolve(join(__dirname, '..', '..', 'scripts', 'pack', 'ts-node'));
const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  return request === 'ts-node' ? standIn : resolveFilename.call(this, request, ...rest);
};
