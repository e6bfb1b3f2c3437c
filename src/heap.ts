/**
 * A binary min-heap kept in an array, ordered by `less`: the timer queues of the virtual clock
 * (src/clock.ts) and of the deterministic simulation's scheduler (dst/scheduler.ts).
 */
export function heapPush<T>(h: T[], item: T, less: (a: T, b: T) => boolean): void {
  h.push(item);
  let i = h.length - 1;
  while (i > 0) {
    const p = (i - 1) >> 1;
    if (!less(h[i]!, h[p]!)) break;
    [h[i], h[p]] = [h[p]!, h[i]!];
    i = p;
  }
}

/** Removes the least item (`h[0]`). */
export function heapPop<T>(h: T[], less: (a: T, b: T) => boolean): void {
  const last = h.pop()!;
  if (h.length === 0) return;
  h[0] = last;
  let i = 0;
  for (;;) {
    const l = 2 * i + 1;
    const r = l + 1;
    let m = i;
    if (l < h.length && less(h[l]!, h[m]!)) m = l;
    if (r < h.length && less(h[r]!, h[m]!)) m = r;
    if (m === i) break;
    [h[i], h[m]] = [h[m]!, h[i]!];
    i = m;
  }
}
