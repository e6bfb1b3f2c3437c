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

  it('routes the other OpenAI endpoints vLLM serves like chat: an embeddings call loads its adapter', async () => {
    const r = await call(stack.url, '/v1/embeddings', {
      body: { model: 'translate-de', input: ['hallo', 'welt'] },
    });
    expect(r.status).toBe(200);
    const e = r.json();
    expect([e.object, e.model, e.data.length, e.data[0].object]).toEqual([
      'list',
      'translate-de',
      2,
      'embedding',
    ]);
    expect(e.data[0].embedding.length).toBeGreaterThan(0);
    const status = (await call(stack.url, '/lora/status')).json();
    expect(
      status.events.some(
        (x: { op: string; adapter: string; result: string }) =>
          x.op === 'load' && x.adapter === 'translate-de' && x.result === 'ok',
      ),
    ).toBe(true);
    const rerank = await call(stack.url, '/v1/rerank', {
      body: { model: 'meta-llama/Llama-3.1-8B-Instruct', query: 'a', documents: ['a', 'b'] },
    });
    expect([rerank.status, rerank.json().results.length]).toEqual([200, 2]);
    // A bad model name is the router's 400, in OpenAI's format, as for chat.
    const bad = await call(stack.url, '/v1/embeddings', { body: { model: 'Not-A-Model!', input: 'x' } });
    expect([bad.status, bad.json().error.code]).toEqual([400, 'invalid_model']);
  });

  it("answers a wrong method with 405 in OpenAI's error format and an Allow header", async () => {
    for (const [method, path, allow] of [
      ['GET', '/v1/chat/completions', 'POST'],
      ['GET', '/v1/embeddings', 'POST'],
      ['DELETE', '/v1/completions', 'POST'],
      ['POST', '/v1/models', 'GET, HEAD'],
    ] as const) {
      const r = await call(stack.url, path, { method });
      expect([method, path, r.status, r.headers.get('allow')]).toEqual([method, path, 405, allow]);
      expect(r.json().error).toMatchObject({ type: 'invalid_request_error', code: 'method_not_allowed' });
    }
    // The right methods still work, and a POST without a body is still a 400.
    expect((await call(stack.url, '/v1/models')).status).toBe(200);
    expect((await call(stack.url, '/v1/chat/completions', { method: 'POST', raw: '' })).status).toBe(400);
  });
});
