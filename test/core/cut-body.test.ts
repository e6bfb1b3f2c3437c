import { createServer, type Server } from 'node:net';
import type { AddressInfo } from 'node:net';
import { ReplicaHttp } from '../../src/backends/http';

// A `/metrics` answer whose connection closes mid-body never reaches the parser as a 200: the
// router's HTTP client refuses it, so the replica's word reads as no answer (no unload on it).
// The simulation's "truncated scrape" fault (dst/replicas.ts) is modelled on this.
const METRICS = 'vllm:lora_requests_info{running_lora_adapters="code",waiting_lora_adapters=""} 1.7e9\n';

function rawServer(reply: string): Promise<{ url: string; server: Server }> {
  const server = createServer((socket) => {
    socket.once('data', () => socket.end(reply));
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`, server }),
    ),
  );
}

describe('a body cut in transit', () => {
  const http = new ReplicaHttp();
  afterAll(() => http.close());

  it.each([
    [
      'shorter than its Content-Length',
      `HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: ${METRICS.length}\r\n\r\n${METRICS.slice(0, 30)}`,
    ],
    [
      'chunked, closed before its last chunk',
      `HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n1e\r\n${METRICS.slice(0, 30)}\r\n`,
    ],
  ])('%s is an error, not a 200 with part of the text', async (_, reply) => {
    const { url, server } = await rawServer(reply);
    try {
      await expect(http.call('GET', url, 2000)).rejects.toMatchObject({ name: 'BackendError' });
    } finally {
      server.close();
    }
  });

  it('whole, it is the text', async () => {
    const { url, server } = await rawServer(
      `HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: ${METRICS.length}\r\nconnection: close\r\n\r\n${METRICS}`,
    );
    try {
      await expect(http.call('GET', url, 2000)).resolves.toMatchObject({ status: 200, text: METRICS });
    } finally {
      server.close();
    }
  });
});
