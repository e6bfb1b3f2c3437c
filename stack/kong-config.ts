import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { KONG_DEFAULT_TIMEOUTS, type ServiceTimeouts } from './gateway';

/** Plugins this harness runs through the plugin server; anything else in kong.yml is Kong's own. */
export const OUR_PLUGINS = new Set(['lora-router', 'lora-poller']);

export interface StackService {
  name: string;
  /** Where Kong sends requests no plugin routed (the first upstream target for an upstream host). */
  fallbackUrl: string;
  paths: string[];
  plugins: { name: string; config: Record<string, unknown> }[];
  /** Bundled Kong plugins configured here that this harness does not run. */
  notRun: string[];
  /** Each route's `response_buffering` (Kong's default true), by path: false streams as responses come. */
  responseBuffering: (path: string) => boolean;
  /** The service's connect, write and read timeouts (ms), Kong's default for those not set. */
  timeouts: ServiceTimeouts;
}

interface DeckPlugin {
  name: string;
  config?: Record<string, unknown>;
}
interface DeckRoute {
  paths?: string[];
  response_buffering?: boolean;
  plugins?: DeckPlugin[];
}
interface DeckService {
  name: string;
  url?: string;
  host?: string;
  port?: number;
  protocol?: string;
  connect_timeout?: unknown;
  write_timeout?: unknown;
  read_timeout?: unknown;
  routes?: DeckRoute[];
  plugins?: DeckPlugin[];
}
interface Deck {
  _format_version?: string;
  services?: DeckService[];
  upstreams?: { name: string; targets?: { target: string }[] }[];
}

/** Reads a decK file (the same kong.yml a Kong user deploys) into what the local gateway needs. */
export function readKongYaml(path: string): StackService[] {
  const deck = parse(readFileSync(path, 'utf8')) as Deck;
  if (deck?._format_version === undefined) throw new Error(`${path}: not a decK file (no _format_version)`);
  return (deck.services ?? []).map((s) => {
    const plugins = [...(s.plugins ?? []), ...(s.routes ?? []).flatMap((r) => r.plugins ?? [])];
    return {
      name: s.name,
      fallbackUrl: fallbackUrl(s, deck),
      paths: (s.routes ?? []).flatMap((r) => r.paths ?? []),
      plugins: plugins
        .filter((p) => OUR_PLUGINS.has(p.name))
        .map((p) => ({ name: p.name, config: structuredClone(p.config ?? {}) })),
      notRun: plugins.filter((p) => !OUR_PLUGINS.has(p.name)).map((p) => p.name),
      responseBuffering: (path: string) =>
        (s.routes ?? []).find((r) => (r.paths ?? []).some((p) => path.startsWith(p)))?.response_buffering !==
        false,
      timeouts: serviceTimeouts(s, path),
    };
  });
}

/** Kong's services schema: each timeout an integer from 1 to 2^31 - 2 ms (services.lua `nonzero_timeout`). */
const MAX_TIMEOUT_MS = 2 ** 31 - 2;

function serviceTimeouts(s: DeckService, file: string): ServiceTimeouts {
  const out = { ...KONG_DEFAULT_TIMEOUTS };
  for (const field of Object.keys(out) as (keyof ServiceTimeouts)[]) {
    const v = s[field];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > MAX_TIMEOUT_MS)
      throw new Error(
        `${file}: service "${s.name}": ${field} must be an integer from 1 to ${MAX_TIMEOUT_MS} (milliseconds), got ${JSON.stringify(v)}`,
      );
    out[field] = v;
  }
  return out;
}

function fallbackUrl(s: DeckService, deck: Deck): string {
  if (s.url) return s.url;
  const upstream = deck.upstreams?.find((u) => u.name === s.host);
  const target = upstream?.targets?.[0]?.target;
  if (target) return `${s.protocol ?? 'http'}://${target}`;
  return `${s.protocol ?? 'http'}://${s.host}:${s.port ?? 80}`;
}

/** The lora-router config of a service, if it has one. */
export function routerConfig(service: StackService): Record<string, unknown> | undefined {
  return service.plugins.find((p) => p.name === 'lora-router')?.config;
}
