#!/usr/bin/env node
/**
 * `kong-lora-pluginserver`: kong-pdk 0.6.0's `kong-js-pluginserver` (the same flags and output:
 * node_modules/kong-pdk/bin/kong-js-pluginserver), its server wrapped with the fixes in
 * events.ts and its connections read by socket.ts. Kong's `pluginserver_*_start_cmd` and
 * `query_cmd` run this (docker/kong.conf): the npm package's `bin` (lib/pluginserver/main.js,
 * from `npm run build:runtime`).
 */
import type { Server as NetServer } from 'node:net';
import { dirname, join } from 'node:path';
import { encode } from '@msgpack/msgpack';
import { cannotListenAt, projectVersion } from './cli';
import { installClockSkewHook } from './clock-skew';
import { wrapServer, type KongPdkServer } from './events';
import { RateLimitedLog, serveConnections, type PdkLogger } from './socket';
import { attributeToPlugins, containConnectionErrors, installStrayRejectionHandler } from './stray-errors';

// kong-pdk's cli answers --version with kong-pdk's own version (cli.js `program.version`).
if (process.argv.slice(2).includes('--version')) {
  console.log(projectVersion());
  process.exit(0);
}

const pdkDir = dirname(require.resolve('kong-pdk/package.json'));
const cli = require('kong-pdk/cli') as { parse(): Record<string, string | undefined> };
const Server = require('kong-pdk/server') as new (
  dir: string,
  logger: unknown,
) => KongPdkServer & {
  GetPluginInfo(name: string): Promise<unknown>;
  getPlugins(): Map<string, unknown>;
  close(): void;
};
const Listener = require('kong-pdk/listener') as new (
  server: unknown,
  path: string,
) => { serve(): NetServer };
const logger = require(require.resolve('node-color-log', { paths: [pdkDir] })) as PdkLogger & {
  setLevel(l?: string): void;
  setLevelNoColor(): void;
};

const opts = cli.parse();
logger.setLevel(opts.logLevel);
// node-color-log colours its lines and moves the cursor up to join them; Kong copies this output
// into its error log, where those codes are noise.
if (!process.stdout.isTTY || process.env.NO_COLOR) logger.setLevelNoColor();
const server = new Server(opts.pluginsDirectory!, logger);

if (opts.DumpPluginInfo) {
  void server.GetPluginInfo(opts.DumpPluginInfo).then((v) => process.stdout.write(encode(v)));
} else if (opts.DumpAllPlugins) {
  void Promise.all([...server.getPlugins().keys()].map((p) => server.GetPluginInfo(p))).then((values) =>
    console.log(JSON.stringify(values)),
  );
} else {
  const socketPath = join(opts.kongPrefix!, opts.sockName!);
  const cannot = (why: string) => {
    console.error(
      `kong-lora-pluginserver: cannot listen on ${socketPath}: ${why} ` +
        '(-p / --kong-prefix names the directory, --sock-name the file)',
    );
    process.exit(1);
  };
  const why = cannotListenAt(socketPath);
  if (why !== undefined) cannot(why);
  installClockSkewHook();
  installStrayRejectionHandler();
  wrapServer(server);
  attributeToPlugins(server);
  const listener = new Listener(server, socketPath).serve();
  // One budget for a peer's resets and its refused bytes: neither may flood Kong's error log.
  const warn = new RateLimitedLog((line) => console.error(line));
  // Before it listens, an error is the socket's; after, a failed accept (EMFILE) that kong-pdk
  // left unhandled, ending the process.
  let listening = false;
  listener.once('listening', () => (listening = true));
  listener.on('error', (err) =>
    listening ? warn.log(`[kong-lora-pluginserver] warn: socket: ${err.message}`) : cannot(err.message),
  );
  containConnectionErrors(listener, (line) => warn.log(line));
  serveConnections(listener, server, logger, warn);
}
// As kong-pdk's own entry: stops its instance-expiry timer (the listener keeps the process up).
server.close();
