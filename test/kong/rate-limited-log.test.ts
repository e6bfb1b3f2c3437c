/** Unit test of the plugin server's rate-limited warnings (pluginserver/socket.ts). */
import { RateLimitedLog } from '../../pluginserver/socket';
import { waitFor } from '../../harness/wait';

it('writes the first lines of a window, then how many it held back when the window ends', async () => {
  const lines: string[] = [];
  const log = new RateLimitedLog((l) => lines.push(l), 3, 200);
  for (let i = 0; i < 10; i++) log.log(`closed ${i}`);
  expect(lines).toEqual(['closed 0', 'closed 1', 'closed 2']);
  await waitFor(() => lines.length === 4, 5000, 'the held-back count');
  expect(lines[3]).toMatch(/ 7 more warnings of the socket in 0.2 s not logged$/);
  // A new window writes again.
  log.log('closed 10');
  expect(lines[4]).toBe('closed 10');
});
