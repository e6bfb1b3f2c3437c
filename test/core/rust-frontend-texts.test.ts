import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { HttpReplicaApi } from '../../src/backends/http-replica-api';

/**
 * vLLM's Rust frontend (`VLLM_USE_RUST_FRONTEND=1`) answers the LoRA routes with its own texts
 * (rust/src/server/src/lora.rs `LoadLoraError`/`UnloadLoraError`, routes/lora.rs, error.rs
 * `ApiError`; docs/replica-apis.md): a loopback server answering exactly those bodies.
 */
describe("the LoRA routes of vLLM's Rust frontend", () => {
  let server: http.Server;
  let url: string;
  let answer: { status: number; body: unknown } = { status: 200, body: '' };
  const api = new HttpReplicaApi();
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(answer.status).end(JSON.stringify(answer.body)));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await api.http.close();
    await new Promise((r) => server.close(r));
  });
  const error = (status: number, message: string, type: string, param: string | null, code: string) => ({
    status,
    body: { error: { message, type, param, code } },
  });

  it('a load of a name another router loaded first is that load, not a rejected adapter', async () => {
    answer = error(
      400,
      "LoRA adapter `sql` is already loaded. If you want to load the adapter in place, set 'load_inplace' to true.",
      'invalid_request_error',
      'lora_name',
      'invalid_request_error',
    );
    await expect(api.loadAdapter(url, 'sql', '/adapters/sql', 2000)).resolves.toBe('already-loaded');
  });

  it('an unload of a name it does not hold is absent, not a replica failure', async () => {
    answer = error(
      404,
      'The model `sql` does not exist.',
      'invalid_request_error',
      'model',
      'model_not_found',
    );
    await expect(api.unloadAdapter(url, 'sql', 2000)).resolves.toBe('absent');
  });
});
