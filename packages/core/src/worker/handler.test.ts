import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { HandlerError } from '../protocol/errors.js';
import { loadHandler } from './handler.js';

const dir = mkdtempSync(join(tmpdir(), 'statusq-handler-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function module(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

describe('loadHandler', () => {
  it('loads the default export and an optional isAbuse rule', async () => {
    const plain = await loadHandler(module('plain.mjs', 'export default async (job) => job.id;'));
    expect(typeof plain.handler).toBe('function');
    expect(plain.isAbuse).toBeUndefined();
    const ruled = await loadHandler(module('ruled.mjs', 'export default async () => 1;\nexport function isAbuse(row) { return row.kind === "abuse"; }'));
    expect(ruled.isAbuse?.({ kind: 'abuse' })).toBe(true);
  });

  it('is a HandlerError for a missing file, no default export, a default that is not a function, a bad isAbuse, or a module that throws', async () => {
    const cases: Array<[string, RegExp]> = [
      [join(dir, 'missing.mjs'), /not found/],
      [module('no-default.mjs', 'export async function handle() {}'), /no default export/],
      [module('object.mjs', 'export default { handle() {} };'), /not a function/],
      [module('bad-rule.mjs', 'export default async () => 1;\nexport const isAbuse = true;'), /isAbuse/],
      [module('throws.mjs', 'throw new Error("top-level failure");\nexport default () => 1;'), /could not be loaded.*top-level failure/],
      [module('syntax.mjs', 'export default async (job => ;'), /could not be loaded/],
    ];
    for (const [path, message] of cases) {
      const error = await loadHandler(path).then(
        () => null,
        (e: unknown) => e,
      );
      expect(error, path).toBeInstanceOf(HandlerError);
      expect((error as Error).message).toMatch(message);
    }
  });
});
