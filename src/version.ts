import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * The project's version, read from package.json so it is written once: the nearest
 * package.json above this file (src/ under ts-jest, dist/src/ once compiled).
 */
export function packageVersion(from = __dirname): string {
  for (let dir = from; ; dir = dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === 'kong-lora-router' && pkg.version) return pkg.version;
    } catch {
      // no package.json here: look further up
    }
    if (dirname(dir) === dir) throw new Error('kong-lora-router: package.json not found above ' + from);
  }
}
