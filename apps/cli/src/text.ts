/** An error's message (or any value) as one line of output. */
export function oneLine(value: unknown): string {
  return (value instanceof Error ? value.message : String(value)).replace(/\s+/g, ' ').trim();
}

/**
 * Text from a handler (an error, an abuse reason) as one bounded line: a handler that throws a 1 MB message
 * must not print 1 MB per job.
 */
export function clip(text: string, max = 500): string {
  return bounded(text.replace(/\s+/g, ' ').trim(), max);
}

/** `text` cut at `max` characters, saying how long it was. */
export function bounded(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length} chars)`;
}

/** `45s`, `3m`, `5h`, `2d`: a length of time in its largest whole unit (days from two of them), for an operator's eye. */
export function wholeUnits(ms: number): string {
  const [size, unit] = ms >= 172_800_000 ? [86_400_000, 'd'] : ms >= 3_600_000 ? [3_600_000, 'h'] : ms >= 60_000 ? [60_000, 'm'] : [1000, 's'];
  return `${Math.floor(ms / size)}${unit}`;
}
