/** One HTTP attempt the openai client made: its retries are otherwise invisible. */
export interface Attempt {
  model: string;
  /** When the attempt was sent, and when its response headers arrived (ms). */
  sent: number;
  at: number;
  status: number;
  retryAfter: string | null;
}

/** A `fetch` for `new OpenAI({ fetch })` that records every attempt, retries included. */
export function recordAttempts(): { attempts: Attempt[]; fetch: typeof fetch } {
  const attempts: Attempt[] = [];
  const recording: typeof fetch = async (input, init) => {
    const sent = Date.now();
    const res = await fetch(input, init);
    const body = typeof init?.body === 'string' ? (JSON.parse(init.body) as { model?: string }) : {};
    attempts.push({
      model: body.model ?? '',
      sent,
      at: Date.now(),
      status: res.status,
      retryAfter: res.headers.get('retry-after'),
    });
    return res;
  };
  return { attempts, fetch: recording };
}
