import { join } from 'node:path';
import { refuseMany } from '../../harness/kong/exits';
import type { BenchPart } from './context';

/** Memory per exit (issue 13): refused requests through the project's plugin server. Opt-in: about 5 minutes. */
export const exitsPart: BenchPart = {
  name: 'exits',
  async run(c) {
    const { v, root, log, json, md } = c;
    const requests = v.requests ? Number(v.requests) : 1_000_000;
    log(
      `memory per exit: ${requests.toLocaleString('en-US')} refused requests through the real plugin server:`,
    );
    const r = await refuseMany(join(root, 'dist', 'plugins'), { requests });
    const growth = r.heapAfter / r.heapBefore - 1;
    log(
      `  heap after GC ${(r.heapBefore / 1e6).toFixed(1)} MB -> ${(r.heapAfter / 1e6).toFixed(1)} MB (${(growth * 100).toFixed(1)}%), statuses ${JSON.stringify(r.statuses)}`,
    );
    json.exits = r;
    md.push(
      '## Memory per exit',
      '',
      `${requests.toLocaleString('en-US')} requests refused by lora-router (404, one \`kong.response.exit\` each) through the project's plugin server, driven as Kong drives it: heap after a full GC ${(r.heapBefore / 1e6).toFixed(1)} MB after the warm-up, ${(r.heapAfter / 1e6).toFixed(1)} MB after (${(growth * 100).toFixed(1)}%).`,
      '',
    );
  },
};
