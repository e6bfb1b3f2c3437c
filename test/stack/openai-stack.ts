/**
 * The local stack (real plugin server, simulated replicas over loopback) as the official
 * `openai` npm client calls it, with every HTTP attempt recorded: the SDK's retries are
 * otherwise invisible.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { parse, stringify } from 'yaml';
import { LocalStack } from '../../stack/stack';

const ROOT = join(__dirname, '..', '..');

/** One HTTP attempt the client made. */
export interface Attempt {
  model: string;
  /** When the attempt was sent, and when its response headers arrived (ms). */
  sent: number;
  at: number;
  status: number;
  retryAfter: string | null;
}

export interface OpenAiStack {
  stack: LocalStack;
  client: OpenAI;
  attempts: Attempt[];
}

/** Starts the stack on kong.yml as a user writes it, its lora-router config changed by `edit`. */
export async function startOpenAiStack(
  edit: (router: Record<string, unknown>) => void,
  /** Receives what `npm start` would print (the stack's and the plugin server's lines). */
  log: (line: string) => void = () => undefined,
  /** Node options and environment for the plugin server (a preload). */
  pluginServerNode?: { args: string[]; env: Record<string, string> },
): Promise<OpenAiStack> {
  const deck = parse(readFileSync(join(ROOT, 'kong.yml'), 'utf8'));
  edit(deck.services[0].plugins.find((p: { name: string }) => p.name === 'lora-router').config);
  const dir = mkdtempSync(join(tmpdir(), 'openai-stack-'));
  const file = join(dir, 'kong.yml');
  writeFileSync(file, stringify(deck));
  // The stack reads its kong.yml at start only: the file goes once it is up.
  const stack = await LocalStack.start({
    port: 0,
    host: '127.0.0.1',
    fleetPort: 0,
    kongYaml: file,
    timeScale: 4,
    pluginsDir: join(ROOT, 'dist', 'plugins'),
    log,
    pluginServerNode,
  }).finally(() => rmSync(dir, { recursive: true, force: true }));
  const attempts: Attempt[] = [];
  const recording: typeof fetch = async (input, init) => {
    const sent = Date.now();
    const res = await fetch(input, init);
    const body = typeof init?.body === 'string' ? (JSON.parse(init.body) as { model?: string }) : {};
    attempts.push({
      model: body.model ?? '',
      sent,
      at: Date.now(),
      status: res.status,
      retryAfter: res.headers.get('retry-after'),
    });
    return res;
  };
  const client = new OpenAI({
    baseURL: `${stack.url}/v1`,
    apiKey: 'demo-key',
    fetch: recording,
    timeout: 20_000,
  });
  return { stack, client, attempts };
}
