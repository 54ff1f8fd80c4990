/**
 * JSON as the CLI prints and the dashboard serves it: times as ISO strings (Date's own toJSON) and big
 * integers as numbers when exact, else strings (JSON.stringify throws on a bigint). `scrub` rewrites every
 * string value (the dashboard hides the database password with it); the structure is never touched, so a
 * short password can not break the JSON the way a scrub of the whole text could.
 */
export function toJson(value: unknown, scrub?: (text: string) => string): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v === 'bigint') return Number.isSafeInteger(Number(v)) ? Number(v) : v.toString();
    if (scrub && typeof v === 'string') return scrub(v);
    return v;
  });
}
