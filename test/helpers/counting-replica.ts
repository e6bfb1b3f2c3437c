import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A replica on loopback that answers nothing useful (404) and counts the calls made to it. */
export type CountingReplica = { url: string; hits: number; close: () => Promise<void> };

/** Starts one: its polls (and any request) each count a hit. */
export async function countingReplica(): Promise<CountingReplica> {
  const c: CountingReplica = { url: '', hits: 0, close: async () => {} };
  const server = http.createServer((_req, res) => {
    c.hits++;
    res.statusCode = 404;
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  c.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  c.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return c;
}
