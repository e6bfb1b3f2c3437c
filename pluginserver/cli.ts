/** What the command says about itself and about where it listens, before kong-pdk starts. */
import { accessSync, constants, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * The project's version, from the package.json two levels up: the repository's beside
 * dist/pluginserver/, the installed package's beside lib/pluginserver/ (the Docker image too).
 */
export function projectVersion(): string {
  const pkg = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as {
    version: string;
  };
  return pkg.version;
}

/** Linux's `sun_path` holds 108 bytes, the last a NUL (unix(7)). */
const MAX_SOCKET_PATH_BYTES = 107;

/**
 * Why a unix socket cannot be created at `path`, or undefined when nothing stands in the way.
 * kong-pdk's listener would throw or emit the bare errno instead (ENOENT, EACCES, ENOTDIR).
 */
export function cannotListenAt(path: string): string | undefined {
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH_BYTES)
    return `the path is ${Buffer.byteLength(path)} bytes, longer than a unix socket path may be (${MAX_SOCKET_PATH_BYTES})`;
  const dir = dirname(path);
  let isDir: boolean;
  try {
    isDir = statSync(dir).isDirectory();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return `the directory ${dir} does not exist`;
    if (code === 'ENOTDIR') return `${dir} is not a directory`;
    return `${dir} cannot be read (${code ?? (err as Error).message})`;
  }
  if (!isDir) return `${dir} is not a directory`;
  try {
    accessSync(dir, constants.W_OK | constants.X_OK);
  } catch {
    return `the directory ${dir} is not writable by this user (uid ${process.getuid?.() ?? '?'})`;
  }
  return undefined;
}
