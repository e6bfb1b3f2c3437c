import { posix } from 'node:path';
import { errors } from '../errors';
import type { AdapterRef } from '../fleet/types';
import type { RequestKind } from '../scheduler/types';

export interface CatalogConfig {
  baseModel?: string;
  adapters: { name: string; path?: string; static: boolean }[];
  /** e.g. `/adapters/{name}`: any name matching `namePattern` maps to a path under its root. */
  pathTemplate?: string;
  namePattern: string;
}

export type Resolved =
  | { kind: 'base' }
  | {
      kind: Exclude<RequestKind, 'base'>;
      adapter: AdapterRef;
      /** Not in the configuration: served only if some replica's registry holds it. */
      discovered?: boolean;
    };

export const DEFAULT_NAME_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$';
const MAX_NAME = 256;
/** Names a request checked remembered (more, and the memory is emptied and refilled). */
const CHECKED_NAMES = 4096;

/**
 * Which adapters exist and where their files are. A request's `model` resolves to the base
 * model, a registered adapter, or a templated one; anything else is refused here, before any
 * replica is contacted. A templated path can never leave the template's root directory.
 */
export class AdapterCatalog {
  private readonly byName = new Map<string, { path?: string; static: boolean }>();
  private readonly pattern: RegExp;
  private readonly root: string | undefined;
  /**
   * Names not in the configuration that passed `checkName`, with their templated path (null
   * without a template: a name a replica may have registered). A request's name is checked once,
   * not each time: its two regular expressions ran on every request, cache-cold in Kong.
   */
  private readonly checked = new Map<string, string | null>();

  constructor(private readonly config: CatalogConfig) {
    for (const a of config.adapters) this.byName.set(a.name, { path: a.path, static: a.static });
    this.pattern = new RegExp(config.namePattern);
    if (config.pathTemplate !== undefined) {
      const t = config.pathTemplate;
      if (!t.includes('{name}')) throw new Error('adapter_path_template must contain {name}');
      this.root = posix.normalize(t.slice(0, t.indexOf('{name}')));
    }
  }

  /** Static adapters are never unloaded, whatever a replica's registry suggests. */
  isStatic(name: string): boolean {
    return this.byName.get(name)?.static === true;
  }

  /** Listed in the configuration (so known to exist), rather than a name a client chose. */
  isListed(name: string): boolean {
    return this.byName.has(name);
  }

  /** Whether this configuration would load `name` from `path` itself (so it is not a start-up adapter). */
  manages(name: string, path: string): boolean {
    const listed = this.byName.get(name);
    if (listed) return !listed.static;
    if (this.root === undefined) return false;
    try {
      this.checkName(name);
      return this.templatedPath(name) === posix.normalize(path);
    } catch {
      return false;
    }
  }

  /** Every adapter the configuration names (templated ones are open-ended). */
  registered(): { name: string; path?: string; static: boolean }[] {
    return [...this.byName].map(([name, a]) => ({ name, ...a }));
  }

  /** Throws a RouterError (400 invalid name, 404 unknown) for a name that does not resolve. */
  resolve(model: string | undefined): Resolved {
    if (model === undefined || model === '' || model === this.config.baseModel) return { kind: 'base' };
    const known = this.byName.get(model);
    if (known)
      return { kind: known.static ? 'static' : 'on-demand', adapter: { name: model, path: known.path } };
    let path = this.checked.get(model);
    if (path === undefined) {
      this.checkName(model);
      // No template: the name can only be one a replica registered at start (--lora-modules).
      path = this.root === undefined ? null : this.templatedPath(model);
      if (this.checked.size >= CHECKED_NAMES) this.checked.clear();
      this.checked.set(model, path);
    }
    if (path === null) return { kind: 'static', adapter: { name: model }, discovered: true };
    return { kind: 'on-demand', adapter: { name: model, path } };
  }

  private checkName(name: string): void {
    if (name.length > MAX_NAME || /[\0/\\]/.test(name) || name === '.' || name.includes('..')) {
      throw errors.invalidModel(
        `Invalid adapter name '${truncate(name)}': it may not contain '/', '\\', '..' or NUL.`,
      );
    }
    if (!this.pattern.test(name)) {
      throw errors.invalidModel(
        `Invalid adapter name '${truncate(name)}': it must match ${this.config.namePattern}.`,
      );
    }
  }

  private templatedPath(name: string): string {
    const path = posix.normalize(this.config.pathTemplate!.split('{name}').join(name));
    // Defence in depth: whatever the pattern allows, the result stays under the root.
    if (!path.startsWith(this.root!) || path.split('/').includes('..')) {
      throw errors.invalidModel(`Invalid adapter name '${truncate(name)}'.`);
    }
    return path;
  }
}

function truncate(s: string): string {
  let printable = '';
  for (const ch of s.slice(0, 65)) printable += ch < ' ' || ch === '\u007f' ? '?' : ch;
  return printable.length > 64 ? printable.slice(0, 64) + '…' : printable;
}
