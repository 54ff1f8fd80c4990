/** Bounds every request: a JetStream API call, a PubAck, an ack's confirmation, a release's flush. */
export const REQUEST_TIMEOUT_MS = 5_000;

/** Settles `promise` or rejects with `onTimeout()` after `ms`, leaving no timer behind. */
export async function within<T>(promise: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
