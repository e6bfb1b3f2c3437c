/** What a newcomer meets in the first hour with `npm start`, through the local stack over real HTTP. */
import http from 'node:http';
import { join } from 'node:path';
import { LocalStack } from '../../stack/stack';
import { call, chat } from '../helpers/http';

const ROOT = join(__dirname, '..', '..');
let stack: LocalStack;
const logged: string[] = [];

beforeAll(async () => {
  stack = await LocalStack.start({
    port: 0,
    host: '127.0.0.1',
    fleetPort: 0,
    kongYaml: join(ROOT, 'kong.yml'),
    timeScale: 4,
    pluginsDir: join(ROOT, 'dist', 'plugins'),
    log: (line) => logged.push(line),
  });
});

afterAll(async () => {
  await stack?.stop();
});

/** A POST the way curl sends a large body: `Expect: 100-continue`, the body only after `100 Continue`. */
function postExpectingContinue(
  url: string,
  body: Buffer,
): Promise<{ status: number; text: string; continued: boolean }> {
  return new Promise((resolve, reject) => {
    let continued = false;
    const req = http.request(
      url,
      {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'content-length': body.length,
          expect: '100-continue',
        },
        timeout: 20_000,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text, continued }));
      },
    );
    req.on('continue', () => {
      continued = true;
      req.end(body);
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
  });
}

describe('the local gateway', () => {
  it('takes a 2 MiB body sent with Expect: 100-continue (as curl sends it) and proxies it', async () => {
    const body = Buffer.from(
      JSON.stringify(chat('meta-llama/Llama-3.1-8B-Instruct', 2, { pad: 'x'.repeat(2 << 20) })),
    );
    const r = await postExpectingContinue(`${stack.url}/v1/chat/completions`, body);
    expect(r.continued).toBe(true);
    expect([r.status, JSON.parse(r.text).model]).toEqual([200, 'meta-llama/Llama-3.1-8B-Instruct']);
  });
});
