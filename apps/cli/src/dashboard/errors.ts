// The API's error bodies: `{ error: { kind, message } }`, one kind per HTTP status the contract names.
import { toJson } from '../json.js';

export type ErrorKind = 'BadRequest' | 'ReadOnly' | 'Unauthorized' | 'NotFound' | 'Database' | 'UnsupportedMediaType' | 'Forbidden' | 'Internal';

/** What a request carries past the guards: the Basic auth user name, for the action log. */
export interface DashboardEnv {
  Variables: { user: string | null };
}

export const JSON_TYPE = { 'Content-Type': 'application/json; charset=utf-8' } as const;

export function errorBody(kind: ErrorKind, message: string): string {
  return toJson({ error: { kind, message } });
}
