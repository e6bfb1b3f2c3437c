/**
 * Defence in depth: one plugin's stray promise rejection, or one Kong connection's socket error,
 * must not end the plugin server, which serves every plugin for every Kong worker of the node.
 *
 * Why not let it die and be restarted: Kong restarts a plugin server it started, but no sooner
 * than a second after the last start (Kong/kong 3.9.3 kong/runloop/plugin_servers/process.lua
 * `pluginserver_timer`: `next_spawn = ngx.now() + 1`). Meanwhile a worker without an instance
 * answers 500 and one with an instance lets the request through unrouted (docs/kong.md, "When
 * the plugin server is down"), and the new process starts empty: the in-flight leases and the
 * failover records it held are gone. kong-pdk 0.6.0 installs no handler of its own
 * (node_modules/kong-pdk/server.js, listener.js, bin/kong-js-pluginserver), so on Node 20 an
 * unhandled rejection anywhere ends the process, and so does an 'error' on a Kong connection
 * (listener.js listens for none: a worker that closed its end before the reply is an EPIPE).
 *
 * Each rejection is logged with the name of the plugin whose call began the work that failed
 * (an AsyncLocalStorage around the calls that run plugin code; Node 20 emits
 * 'unhandledRejection' in the rejected promise's async context) and the server keeps serving.
 * A rejection nobody awaited unwound no caller, so nothing is left half done. This is a last
 * resort: a stray rejection found is still a bug to fix where it starts (issue 24's was in
 * ioredis's re-subscribe, src/fleet/redis/redis-store.ts).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Server as NetServer } from 'node:net';
import type { KongPdkServer } from './events';

const pluginOfCall = new AsyncLocalStorage<string>();

/** kong-pdk's plugin instance (lib/mod.js `Instance`): its plugin's name. */
interface PdkInstance {
  getName(): string;
}

/**
 * Runs the RPC methods that run plugin code (StartInstance: the plugin's constructor;
 * HandleEvent: its phase, which kong-pdk starts in a setImmediate made inside the call;
 * CloseInstance) in the plugin's context: timers, sockets and promises they create keep it.
 */
export function attributeToPlugins(server: KongPdkServer): void {
  const instances = server.instances as Map<number, PdkInstance> | undefined;
  const nameOf: Record<string, (arg: unknown) => string | undefined> = {
    StartInstance: (cfg) => (cfg as { Name?: string } | null)?.Name,
    HandleEvent: (event) =>
      instances?.get((event as { InstanceId?: number } | null)?.InstanceId ?? -1)?.getName(),
    CloseInstance: (iid) => instances?.get(iid as number)?.getName(),
  };
  for (const [method, name] of Object.entries(nameOf)) {
    const original = server[method] as (...a: unknown[]) => Promise<unknown>;
    server[method] = (...args: unknown[]) => {
      const plugin = name(args[0]);
      return plugin === undefined
        ? original.apply(server, args)
        : pluginOfCall.run(plugin, () => original.apply(server, args));
    };
  }
}

/** Logs a stray rejection with its plugin's name and keeps the process serving. */
export function installStrayRejectionHandler(log: (line: string) => void = (l) => console.error(l)): void {
  process.on('unhandledRejection', (reason) => {
    const plugin = pluginOfCall.getStore();
    const where = plugin !== undefined ? `plugin ${plugin}` : 'the plugin server (no plugin call began it)';
    const what = reason instanceof Error ? (reason.stack ?? reason.message) : String(reason);
    log(`[kong-lora-pluginserver] error: unhandled promise rejection in ${where}; still serving: ${what}`);
  });
}

/** A Kong connection's socket error closes that connection only (kong-pdk listens for none). */
export function containConnectionErrors(
  listener: NetServer,
  log: (line: string) => void = (l) => console.error(l),
): void {
  listener.on('connection', (socket) => {
    socket.on('error', (err: NodeJS.ErrnoException) => {
      // EPIPE / ECONNRESET: the worker went away before its reply; nothing else to do.
      log(`[kong-lora-pluginserver] warn: Kong connection failed (${err.code ?? err.message}): closed`);
    });
  });
}
