/** An error's message (or any value) as one line of output. */
export function oneLine(value: unknown): string {
  return (value instanceof Error ? value.message : String(value)).replace(/\s+/g, ' ').trim();
}
