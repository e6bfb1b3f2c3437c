#!/usr/bin/env node
/**
 * `kong-lora-pluginserver`: kong-pdk 0.6.0's `kong-js-pluginserver` (the same flags and output:
 * node_modules/kong-pdk/bin/kong-js-pluginserver), its server wrapped with the fixes in
 * events.ts. Kong's `pluginserver_*_start_cmd` and `query_cmd` run this (docker/kong.conf): the
 * npm package's `bin` (lib/pluginserver/main.js, from `npm run build:runtime`).
 */
import type { Server as NetServer } from 'node:net';
import { dirname, join } from 'node:path';
import { encode } from '@msgpack/msgpack';
import { installClockSkewHook } from './clock-skew';
import { wrapServer, type KongPdkServer } from './events';
import { attributeToPlugins, containConnectionErrors, installStrayRejectionHandler } from './stray-errors';

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
const logger = require(require.resolve('node-color-log', { paths: [pdkDir] })) as {
  setLevel(l?: string): void;
};

const opts = cli.parse();
logger.setLevel(opts.logLevel);
const server = new Server(opts.pluginsDirectory!, logger);

if (opts.DumpPluginInfo) {
  void server.GetPluginInfo(opts.DumpPluginInfo).then((v) => process.stdout.write(encode(v)));
} else if (opts.DumpAllPlugins) {
  void Promise.all([...server.getPlugins().keys()].map((p) => server.GetPluginInfo(p))).then((values) =>
    console.log(JSON.stringify(values)),
  );
} else {
  installClockSkewHook();
  installStrayRejectionHandler();
  wrapServer(server);
  attributeToPlugins(server);
  containConnectionErrors(new Listener(server, join(opts.kongPrefix!, opts.sockName!)).serve());
}
// As kong-pdk's own entry: stops its instance-expiry timer (the listener keeps the process up).
server.close();
