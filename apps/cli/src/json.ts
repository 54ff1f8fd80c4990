/**
 * JSON as the CLI prints and the dashboard serves it: times as ISO strings (Date's own toJSON) and big
 * integers as numbers when exact, else strings (JSON.stringify throws on a bigint).
 */
export function toJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? (Number.isSafeInteger(Number(v)) ? Number(v) : v.toString()) : v));
}
