import { useSimFleet } from '../helpers/sim-fleet';
import { get } from '../helpers/http';

/**
 * vLLM registers its load/unload routes only with `VLLM_ALLOW_RUNTIME_LORA_UPDATING`; Starlette
 * answers another method on a registered path 405 (starlette/routing.py, Route.matches), an
 * unregistered path FastAPI's 404. The preflight check tells the two apart by a GET.
 */
describe('simulated vLLM: the LoRA routes with another method', () => {
  const { start, fleet } = useSimFleet();

  it('answers GET 405 with runtime loading on, 404 with it off, and logs no call', async () => {
    const [on, off] = await start({}, { runtimeLoading: false });
    for (const path of ['/v1/load_lora_adapter', '/v1/unload_lora_adapter']) {
      const a = await get(on!, path);
      expect([a.status, a.json()]).toEqual([405, { detail: 'Method Not Allowed' }]);
      const b = await get(off!, path);
      expect([b.status, b.json()]).toEqual([404, { detail: 'Not Found' }]);
    }
    expect(fleet().replicas[0]!.adapterLog()).toEqual([]);
  });
});
