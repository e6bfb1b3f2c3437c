import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LocalGateway } from './gateway';

/** Kong's router in miniature: the longest route path prefix picks the service's gateway. */
export class StackServer {
  private server: http.Server | null = null;
  private readonly routes: { prefix: string; gateway: LocalGateway }[];

  constructor(routes: { prefix: string; gateway: LocalGateway }[]) {
    this.routes = [...routes].sort((a, b) => b.prefix.length - a.prefix.length);
  }

  /** Listens; a port in use is reported in plain words. */
  async listen(port: number, host = '127.0.0.1'): Promise<string> {
    const server = http.createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0]!;
      const route = this.routes.find(
        (r) => path === r.prefix || path.startsWith(r.prefix.endsWith('/') ? r.prefix : r.prefix + '/'),
      );
      if (!route) {
        res
          .writeHead(404, { 'content-type': 'application/json' })
          .end('{"message":"no Route matched with those values"}');
        return;
      }
      route.gateway.serve(req, res).catch((err: Error) => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ message: `gateway error: ${err.message}` }));
      });
    });
    server.keepAliveTimeout = 10_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', (err: NodeJS.ErrnoException) =>
        reject(
          err.code === 'EADDRINUSE'
            ? new Error(`port ${port} on ${host} is in use: pass --port to choose another`)
            : err,
        ),
      );
      server.listen(port, host, () => resolve());
    });
    this.server = server;
    return `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${(server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    const s = this.server;
    this.server = null;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((r) => s.close(() => r()));
  }
}
