/**
 * Benchmark baseline: a plugin that makes exactly lora-router's PDK calls for a resident adapter
 * (4 in access, 2 in log), with the same arguments, and decides nothing. Never installed: the
 * benchmark links it into a temporary plugins directory.
 */
import type Kong from 'kong-pdk/kong';
import { parseRouterConfig } from '../src/config/parse';

/** lora-router's `max_body_bytes` by default: it passes it to `get_raw_body` (plugins/lora-router.ts). */
const MAX_BODY_BYTES = parseRouterConfig({
  replicas: [{ url: 'http://127.0.0.1:1' }],
  base_model: 'b',
}).max_body_bytes;

class NoopPlugin {
  private readonly host: string;
  private readonly port: number;
  constructor(config: { host?: string; port?: number }) {
    this.host = config.host ?? '127.0.0.1';
    this.port = config.port ?? 8000;
  }
  async access(kong: Kong): Promise<void> {
    await kong.request.getPath();
    const getRawBody = kong.request.getRawBody as unknown as (max: number) => Promise<unknown>;
    await getRawBody(MAX_BODY_BYTES);
    await kong.ctx.shared.set('lora_router', {
      lease: 'noop',
      replica: '',
      stage: 'base',
      adapter: null,
    } as never);
    await kong.service.setTarget(this.host, this.port);
  }
  async log(kong: Kong): Promise<void> {
    await kong.ctx.shared.get('lora_router');
    await kong.response.getStatus();
  }
}

export const Name = 'lora-noop';
export const Plugin = NoopPlugin;
export const Schema = [
  { host: { type: 'string', default: '127.0.0.1' } },
  { port: { type: 'integer', default: 8000 } },
];
export const Version = '0.1.0';
export const Priority = 900;
