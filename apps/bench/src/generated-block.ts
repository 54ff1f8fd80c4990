import { readFileSync, writeFileSync } from 'node:fs';

/**
 * Writes `generated` (which starts with `begin` and ends with `end`) into the Markdown file at `path` in place of
 * the block between those markers, leaving the prose around it as written: docs/benchmarks.md and
 * docs/scale-out.md each hold one such block, rewritten by `pnpm bench` and `pnpm scale`. A file that does not
 * exist yet is made with `title`; one that lost its markers gets the block at its end, so a long run's results
 * are never refused at the last step.
 */
export function writeGeneratedBlock(path: string, title: string, markers: { begin: string; end: string }, generated: string): void {
  const { begin, end } = markers;
  let doc: string;
  try {
    doc = readFileSync(path, 'utf8');
  } catch {
    doc = `# ${title}\n\n${begin}\n${end}\n`;
  }
  const start = doc.indexOf(begin);
  const stop = doc.indexOf(end);
  writeFileSync(path, start >= 0 && stop > start ? doc.slice(0, start) + generated + doc.slice(stop + end.length) : `${doc.trimEnd()}\n\n${generated}\n`);
}
