// The API's error bodies: `{ error: { kind, message } }`, one kind per HTTP status the contract names.
import { toJson } from '../json.js';
import type { ErrorKind } from './api-types.js';

/** What a request carries past the guards: the Basic auth user name, for the action log. */
export interface DashboardEnv {
  Variables: { user: string | null };
}

export const JSON_TYPE = { 'Content-Type': 'application/json; charset=utf-8' } as const;

export function errorBody(kind: ErrorKind, message: string): string {
  return toJson({ error: { kind, message } });
}
