/**
 * The plugin server's logger draws each line in steps, moving the cursor back up (`ESC[1A`,
 * `ESC[K`) and colouring it: on a terminal that reads as one line, in a log as garbage. This
 * keeps the last drawing of each line, as plain text.
 */
export function plainLines(emit: (line: string) => void, settleMs = 50): (line: string) => void {
  let pending: string | undefined;
  let timer: NodeJS.Timeout | undefined;
  const flush = () => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    // eslint-disable-next-line no-control-regex
    const text = pending?.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '').trim();
    pending = undefined;
    if (text) emit(text);
  };
  return (line: string) => {
    // A redraw of the line before it replaces it; anything else completes it.
    if (!line.startsWith('\x1b[1A')) flush();
    pending = line;
    if (timer) clearTimeout(timer);
    timer = setTimeout(flush, settleMs);
    timer.unref();
  };
}
