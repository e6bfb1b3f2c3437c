// kong-pdk 0.6.0's lib/mod.js registers ts-node so that a plugins folder may hold .ts files. The
// package ships compiled JavaScript only (lib/plugins), so there is nothing to register, and
// TypeScript is not installed on the Kong node (scripts/pack.js).
module.exports = { register: () => undefined };
