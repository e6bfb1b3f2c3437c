/** Polls `cond` every 5 ms until true; fails after `ms` (every wait in a test is bounded). */
export async function waitFor(
  cond: () => boolean | Promise<boolean>,
  ms = 5000,
  what = 'condition',
): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`${what} not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/**
 * What `read` answers, asked again while it fails (a reply past its timeout on a stalled
 * machine); fails after `ms`. For reads of a shared store itself, which throw rather than fall back.
 */
export async function answered<T>(read: () => Promise<T>, ms = 5000, what = 'a reply'): Promise<T> {
  let reply: { value: T } | undefined;
  await waitFor(
    () =>
      read().then(
        (value) => ((reply = { value }), true),
        () => false,
      ),
    ms,
    what,
  );
  return reply!.value;
}
