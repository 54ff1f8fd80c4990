import { BrokerError, type BrokerErrorKind } from '@statusq/core/adapter';

/**
 * nats.js errors are told apart by class name rather than `instanceof`: an application may end up with two
 * copies of @nats-io/nats-core (one under transport-node, one under jetstream), whose classes differ.
 */
function nameOf(error: unknown): string {
  return error instanceof Error ? error.name : '';
}

/** The JetStream API error code (10059 stream not found, ...) of an error, when it has one. */
export function apiCode(error: unknown): number | undefined {
  if (nameOf(error).endsWith('ApiError') || nameOf(error) === 'StreamNotFoundError' || nameOf(error) === 'ConsumerNotFoundError') {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'number' ? code : undefined;
  }
  return undefined;
}

export const API_STREAM_NOT_FOUND = 10059;
export const API_CONSUMER_NOT_FOUND = 10014;

export function isNotFound(error: unknown): boolean {
  const code = apiCode(error);
  return code === API_STREAM_NOT_FOUND || code === API_CONSUMER_NOT_FOUND || /\b(stream|consumer) not found\b|consumer deleted/i.test(messageOf(error));
}

export function isAuthError(error: unknown): boolean {
  return ['AuthorizationError', 'UserAuthenticationExpiredError', 'PermissionViolationError'].includes(nameOf(error));
}

export function isJetStreamDisabled(error: unknown): boolean {
  return nameOf(error) === 'JetStreamNotEnabled' || apiCode(error) === 10039;
}

/** The connection is gone or going: the operation never reached the server, or its answer never came back. */
export function isConnectionError(error: unknown): boolean {
  return ['ClosedConnectionError', 'ConnectionError', 'DrainingConnectionError'].includes(nameOf(error));
}

export function isTimeout(error: unknown): boolean {
  return nameOf(error) === 'TimeoutError';
}

export function isNoResponders(error: unknown): boolean {
  return nameOf(error) === 'NoRespondersError' || (error as { isNoResponders?: () => boolean })?.isNoResponders?.() === true || /no responders/i.test(messageOf(error));
}

export function messageOf(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error && error.cause.message !== error.message ? ` (${error.cause.message})` : '';
  return `${error.message}${cause}`;
}

/**
 * `error` as a BrokerError. Connection trouble is ConnectionLost and credentials or permissions are Refused
 * whatever the operation; the rest (a timeout, no responders, an API error) is the operation's own `kind`:
 * NotConfirmed for a publish, ConnectionLost for an ack, Refused for setting up streams.
 */
export function toBrokerError(error: unknown, kind: BrokerErrorKind, what: string): BrokerError {
  if (error instanceof BrokerError) return error;
  const native = apiCode(error) ?? (nameOf(error) || undefined);
  const message = `${what}: ${messageOf(error)}`;
  if (isAuthError(error)) return new BrokerError('Refused', message, native, { cause: error });
  if (isConnectionError(error)) return new BrokerError('ConnectionLost', message, native, { cause: error });
  return new BrokerError(kind, message, native, { cause: error });
}

/**
 * An error met while setting the queue up (at connect, or when a consumer finds its stream gone): a server
 * that does not answer in time is Unreachable (JetStream still starting, say), anything the server said no
 * to is Refused.
 */
export function toSetupError(error: unknown, what: string): BrokerError {
  if (error instanceof BrokerError) return error;
  if (isTimeout(error) || isNoResponders(error)) return new BrokerError('Unreachable', `${what}: JetStream did not answer (${messageOf(error)})`, nameOfError(error), { cause: error });
  return toBrokerError(error, 'Refused', what);
}

function nameOfError(error: unknown): string | undefined {
  return error instanceof Error ? error.name : undefined;
}
