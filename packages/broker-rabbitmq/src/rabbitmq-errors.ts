import { BrokerError } from '@statusq/core/adapter';

/**
 * The AMQP reply code an amqplib error carries: `code` on a channel or connection the server closed, or
 * the "403 (ACCESS-REFUSED)" in the text of a handshake the server ended. Undefined for socket errors.
 */
export function replyCode(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'number') return code;
  const match = /\b([1-9]\d\d) \([A-Z_-]+\)/.exec(messageOf(error));
  return match ? Number(match[1]) : undefined;
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The socket-level code (ECONNREFUSED...) or AMQP reply code of an error, kept as BrokerError.nativeCode. */
export function nativeCodeOf(error: unknown): string | number | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' || typeof code === 'number' ? code : replyCode(error);
}

/**
 * Errors that trying again cannot fix: credentials refused (403), a virtual host that is missing or not
 * allowed (530), a queue declared with other settings (406) or held exclusively by another connection (405).
 */
export function isRefusal(error: unknown): boolean {
  const code = replyCode(error);
  return code === 403 || code === 530 || code === 406 || code === 405;
}

export function connectionLost(address: string, what: string, cause?: unknown): BrokerError {
  const why = cause === undefined ? '' : `: ${messageOf(cause)}`;
  return new BrokerError('ConnectionLost', `RabbitMQ at ${address}: ${what}${why}`, cause === undefined ? undefined : nativeCodeOf(cause), { cause });
}
