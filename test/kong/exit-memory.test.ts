/**
 * Defect 5: every request a plugin answers with `kong.response.exit` must leave nothing in the
 * plugin server. The million-request proof is in the benchmark (`npm run bench -- --only exits`).
 */
import { refuseMany } from '../../harness/kong/exits';
import { PLUGINS_DIR } from './world';

it('10,000 refused requests through the real plugin server: heap after GC within 10%', async () => {
  const r = await refuseMany(PLUGINS_DIR, { requests: 10_000, warmup: 2000 });
  expect(r.statuses).toEqual({ 404: 12_000 });
  expect(r.heapAfter).toBeLessThan(r.heapBefore * 1.1);
}, 120_000);
