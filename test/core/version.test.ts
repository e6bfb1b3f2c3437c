import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');

describe("the plugins' Version", () => {
  it("is package.json's, in the compiled plugins the plugin server loads (npm run build)", () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    for (const name of ['lora-router', 'lora-poller']) {
      const plugin = require(join(ROOT, 'dist', 'plugins', `${name}.js`)) as { Version: string };
      expect([name, plugin.Version]).toEqual([name, version]);
    }
  });
});
