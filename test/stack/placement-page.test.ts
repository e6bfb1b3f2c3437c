/** The placement page in headless Chromium (Debian's), driven by playwright-core, while traffic runs. */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { LocalStack } from '../../stack/stack';
import { call, chat } from '../helpers/http';

const ROOT = join(__dirname, '..', '..');
const OUT = join(ROOT, 'test-output');
let stack: LocalStack;
let browser: Browser;

beforeAll(async () => {
  stack = await LocalStack.start({
    port: 0,
    host: '127.0.0.1',
    fleetPort: 0,
    kongYaml: join(ROOT, 'kong.yml'),
    timeScale: 4,
    pluginsDir: join(ROOT, 'dist', 'plugins'),
    log: () => undefined,
  });
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
});

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
});

it('shows a load that just happened in the replica x adapter grid, with saturation bars and the load event', async () => {
  // Kong starts lora-router's instance, which names the replicas, with the first request
  // through it: until then the page has no fleet to show.
  expect((await call(stack.url, '/v1/chat/completions', { body: chat('sql-lora', 2) })).status).toBe(200);
  const page = await browser.newPage({ viewport: { width: 1400, height: 700 } });
  await page.goto(`${stack.url}/lora`);
  await page.waitForSelector('tr[data-replica]');
  // Background traffic on warm adapters (bounded), then a cold one: its load must appear.
  let stop = false;
  const background = (async () => {
    for (let i = 0; i < 40 && !stop; i++)
      await call(stack.url, '/v1/chat/completions', { body: chat(i % 2 ? 'chat-lora' : 'sql-lora', 8) });
  })();
  const r = await call(stack.url, '/v1/chat/completions', { body: chat('finance-qa', 2) });
  expect(r.status).toBe(200);
  const cell = page.locator('td[data-adapter="finance-qa"][data-state="loaded"]');
  await cell.waitFor({ timeout: 5000 });
  expect(await cell.count()).toBe(1);
  expect(await page.locator('tr.event[data-op="load"]', { hasText: 'finance-qa' }).count()).toBeGreaterThan(
    0,
  );
  expect(await page.locator('tr[data-replica] .bar').count()).toBe(stack.fleet.replicas.length);
  // llama.cpp's start-up adapters show as static.
  expect(await page.locator('td[data-adapter="/models/support.gguf"][data-state="static"]').count()).toBe(1);
  mkdirSync(OUT, { recursive: true });
  await page.screenshot({ path: join(OUT, 'placement-page.png'), fullPage: true });
  stop = true;
  await background;
});
