/** The placement page in headless Chromium (Debian's), driven by playwright-core, while traffic runs. */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { parse, stringify } from 'yaml';
import { naturalOrder } from '../../src/status/status';
import { LocalStack } from '../../stack/stack';
import { call, chat, get, post } from '../helpers/http';

const ROOT = join(__dirname, '..', '..');
const OUT = join(ROOT, 'test-output');
let browser: Browser;

const startStack = (kongYaml: string, timeScale: number, keyAuth = false) =>
  LocalStack.start({
    port: 0,
    host: '127.0.0.1',
    fleetPort: 0,
    kongYaml,
    timeScale,
    pluginsDir: join(ROOT, 'dist', 'plugins'),
    log: () => undefined,
    keyAuth,
  });

beforeAll(async () => {
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
});

/** Names of the chips in each row, as shown. */
const rowChips = (page: Page) =>
  page.$$eval('tr[data-replica]', (rows) =>
    rows.map((r) => ({
      url: r.getAttribute('data-replica')!,
      state: r.getAttribute('data-state')!,
      chips: [...r.querySelectorAll('.chip')].map((c) => c.getAttribute('data-adapter')!),
    })),
  );

describe('the placement page (kong.yml fleet)', () => {
  let stack: LocalStack;
  beforeAll(async () => {
    stack = await startStack(join(ROOT, 'kong.yml'), 4);
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('shows a load that just happened as a chip on its replica, with saturation bars and the load event', async () => {
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
    const chip = page.locator('.chip[data-adapter="finance-qa"][data-state="loaded"]');
    await chip.waitFor({ timeout: 5000 });
    expect(await chip.count()).toBe(1);
    expect(await page.locator('tr.event[data-op="load"]', { hasText: 'finance-qa' }).count()).toBeGreaterThan(
      0,
    );
    expect(await page.locator('tr[data-replica] .bar').count()).toBe(stack.replicas.length);
    // llama.cpp's start-up adapters show as static, by the name clients send.
    expect(await page.locator('.chip[data-adapter="support-gguf"][data-state="static"]').count()).toBe(1);
    expect(await page.locator('.chip[data-adapter*="/"]').count()).toBe(0);
    stop = true;
    await background;
  });
});

describe("the placement page behind kong.yml's key-auth", () => {
  let stack: LocalStack;
  beforeAll(async () => {
    // The gateway enforces key-auth as Kong does (a key in the `apikey` header or query argument).
    stack = await startStack(join(ROOT, 'kong.yml'), 4, true);
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('loads its data with the key it was opened with (?apikey=): rows, not "status unavailable"', async () => {
    const apikey = { apikey: 'demo-operator-key' };
    // Without a key, the gateway refuses (key-auth's 401), so the key below is what opens it.
    expect((await get(stack.url, '/lora/status')).status).toBe(401);
    const r = await call(stack.url, '/v1/chat/completions', { body: chat('sql-lora', 2), headers: apikey });
    expect(r.status).toBe(200);
    const page = await browser.newPage({ viewport: { width: 1400, height: 700 } });
    try {
      await page.goto(`${stack.url}/lora?apikey=demo-operator-key`);
      await page
        .waitForFunction(
          "document.querySelectorAll('tr[data-replica]').length > 0 || /status unavailable/.test(document.getElementById('summary').textContent)",
          undefined,
          { timeout: 10_000 },
        )
        .catch(() => undefined);
      const summary = await page.textContent('#summary');
      expect(summary).not.toMatch(/status unavailable/);
      expect(await page.locator('tr[data-replica]').count()).toBe(stack.replicas.length);
    } finally {
      await page.close();
    }
  });
});

describe('a replica whose polls stopped', () => {
  let stack: LocalStack;
  let staleDir: string | undefined;
  beforeAll(async () => {
    // kong.yml with a poll timeout of 20 s: a replica whose /metrics stalls is not failed (down)
    // for that long, its figures just stop coming.
    const deck = parse(readFileSync(join(ROOT, 'kong.yml'), 'utf8'));
    const poller = deck.services[0].plugins.find((p: { name: string }) => p.name === 'lora-poller').config;
    poller.timeout_ms = 20_000;
    const file = join(mkdtempSync(join(tmpdir(), 'placement-stale-')), 'kong.yml');
    writeFileSync(file, stringify(deck));
    stack = await startStack(file, 4);
    staleDir = dirname(file);
  }, 60_000);
  afterAll(async () => {
    await stack?.stop();
    if (staleDir) rmSync(staleDir, { recursive: true, force: true });
  });

  it('shows stale in /status and on the page, while the others stay up', async () => {
    expect((await call(stack.url, '/v1/chat/completions', { body: chat('sql-lora', 2) })).status).toBe(200);
    const page = await browser.newPage({ viewport: { width: 1400, height: 700 } });
    await page.goto(`${stack.url}/lora`);
    await page.waitForSelector('tr[data-replica][data-state="up"]');
    const stalled = stack.replicas[0]!.url;
    // Its /metrics answers only after 15 s: the poll under way waits, and no new one starts.
    await post(stalled, '/_sim/fault', { kind: 'slowMetrics', ms: 15_000 });
    await page.waitForSelector(`tr[data-replica="${stalled}"][data-state="stale"]`, { timeout: 10_000 });
    const status = (await get(stack.url, '/lora/status')).json();
    const states = new Map(
      status.replicas.map((r: { url: string; state: string }) => [r.url, r.state] as const),
    );
    expect(states.get(stalled)).toBe('stale');
    expect(status.replicas.find((r: { url: string }) => r.url === stalled).health).toBe('up'); // not failed
    const others = [...states].filter(([url]) => url !== stalled).map(([, st]) => st);
    expect(others.length).toBeGreaterThan(0);
    expect(others.filter((st) => st === 'stale')).toEqual([]);
    expect(await page.locator('tr[data-replica][data-state="stale"]').count()).toBe(1);
    await post(stalled, '/_sim/fault', { kind: 'slowMetrics', ms: 0 });
  }, 60_000);
});

interface Bucket {
  requests: number;
}

/** Requests in the last minute of a status's history, as the page's "requests / min" card sums them. */
const lastMinute = (s: { history: { bucketMs: number; buckets: Bucket[] } }) =>
  s.history.buckets.slice(-Math.round(60_000 / s.history.bucketMs)).reduce((n, b) => n + b.requests, 0);

describe('the placement page at fleet size: 64 replicas, a few hundred adapters', () => {
  let stack: LocalStack;
  const ADAPTERS = 300;
  beforeAll(async () => {
    // kong.yml with 63 vLLM replicas (6 adapter slots each) and one llama.cpp replica.
    const deck = parse(readFileSync(join(ROOT, 'kong.yml'), 'utf8'));
    const router = deck.services[0].plugins.find((p: { name: string }) => p.name === 'lora-router').config;
    router.replicas = [
      ...Array.from({ length: 63 }, (_, i) => ({ url: `http://gpu-${i + 1}:8000` })),
      { url: 'http://cpu-1:8080', backend: 'llamacpp' },
    ];
    router.max_loaded_adapters = 6;
    const dir = mkdtempSync(join(tmpdir(), 'placement-64-'));
    const file = join(dir, 'kong.yml');
    writeFileSync(file, stringify(deck));
    // Read at start only: the file goes once the stack is up.
    stack = await startStack(file, 30).finally(() => rmSync(dir, { recursive: true, force: true }));
    // A few hundred distinct adapters, 24 requests at a time (bounded in count).
    const names = Array.from({ length: ADAPTERS }, (_, i) => `cust-${i + 1}`);
    for (let i = 0; i < names.length; i += 24) {
      const rs = await Promise.all(
        names
          .slice(i, i + 24)
          .map((n) => call(stack.url, '/v1/chat/completions', { body: chat(n, 2), timeoutMs: 30_000 })),
      );
      expect(rs.map((r) => r.status).filter((s) => s !== 200)).toEqual([]);
    }
    // One replica failing: the health column must say so.
    await post(stack.replicas[5]!.url, '/_sim/fault', { kind: 'error500', on: true });
  }, 180_000);
  afterAll(async () => {
    await stack?.stop();
  });

  it('shows one row per replica, its adapters as naturally sorted chips, health, headline charts, and filters by name', async () => {
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    // What the router counted in the last minute before the page read it (no request comes after).
    const before = lastMinute((await get(stack.url, '/lora/status')).json());
    await page.goto(`${stack.url}/lora`);
    await page.waitForSelector('tr[data-replica][data-state="down"]', { timeout: 10_000 });
    // Polls fresh again on 60 rows, not read at one instant: a poller behind on a loaded machine
    // shows its replicas stale (59 up at a quarter of a core).
    await page.waitForFunction(
      'document.querySelectorAll(\'tr[data-replica][data-state="up"]\').length >= 60',
      undefined,
      {
        timeout: 20_000,
      },
    );
    const status = (await get(stack.url, '/lora/status')).json();
    const rows = await rowChips(page);
    expect(rows).toHaveLength(64);
    // Rows in natural order of their URLs; chips in natural order within a row.
    expect(rows.map((r) => r.url)).toEqual([...rows.map((r) => r.url)].sort(naturalOrder));
    for (const r of rows) expect(r.chips).toEqual([...r.chips].sort(naturalOrder));
    // Every resident adapter is on the page, on its replica (the page is a second behind at most).
    const shown = rows.reduce((n, r) => n + r.chips.length, 0);
    const resident = status.replicas.reduce(
      (n: number, r: { adapters: unknown[]; llamaAdapters: unknown[] }) =>
        n + r.adapters.length + r.llamaAdapters.length,
      0,
    );
    expect(shown).toBeGreaterThanOrEqual(ADAPTERS);
    expect(Math.abs(shown - resident)).toBeLessThanOrEqual(6);
    expect(rows.find((r) => r.url === stack.replicas[5]!.url)!.state).toBe('down');
    expect(rows.filter((r) => r.state === 'up').length).toBeGreaterThanOrEqual(60);
    const llama = rows.find((r) => r.url === stack.replicas[63]!.url)!;
    expect(llama.chips).toEqual(['legal-gguf', 'support-gguf']);
    // Headline figures with their charts.
    expect(await page.locator('.card svg polyline').count()).toBe(6);
    // "requests / min" is the last minute's: the requests above took longer than that on an eighth
    // of the machine (204 of 300 shown). It shows what the router counted then, between the
    // counts read before and after; all 300 are in the history (ten minutes).
    const requests = Number(await page.locator('[data-card="requests"] .value').textContent());
    const after = lastMinute((await get(stack.url, '/lora/status')).json());
    expect([after <= requests, requests <= before]).toEqual([true, true]);
    expect(status.history.buckets.reduce((n: number, b: Bucket) => n + b.requests, 0)).toBeGreaterThanOrEqual(
      ADAPTERS,
    );
    mkdirSync(OUT, { recursive: true });
    await page.screenshot({ path: join(OUT, 'placement-page-64.png'), fullPage: true });

    // Filtering by adapter name keeps the replicas holding a match, and only the matching chips.
    await page.fill('#filter', 'cust-12');
    await page.waitForFunction("document.querySelectorAll('tr[data-replica]').length < 64");
    const filtered = await rowChips(page);
    const holders = new Set(
      status.replicas
        .filter((r: { adapters: { name: string }[] }) => r.adapters.some((a) => a.name.includes('cust-12')))
        .map((r: { url: string }) => r.url),
    );
    expect(filtered.length).toBeGreaterThan(0);
    expect(Math.abs(filtered.length - holders.size)).toBeLessThanOrEqual(2);
    for (const r of filtered) {
      expect(r.chips.length).toBeGreaterThan(0);
      for (const c of r.chips) expect(c).toContain('cust-12');
    }
    await page.screenshot({ path: join(OUT, 'placement-page-64-filtered.png') });
  }, 60_000);
});

// Keep the docs' picture of the page in step when asked (not on every run: it would dirty the tree).
afterAll(() => {
  if (process.env.UPDATE_DOCS_SCREENSHOT)
    copyFileSync(join(OUT, 'placement-page-64.png'), join(ROOT, 'docs', 'placement-page.png'));
});
