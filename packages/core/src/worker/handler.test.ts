import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { HandlerError } from '../protocol/errors.js';
import { loadHandler, loadKindHandlers } from './handler.js';

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
    const byKind = await loadHandler(module('kinds.mjs', 'export default { email: async () => "sent", report: async () => "made" };'));
    expect(byKind.handler).toBeUndefined();
    expect(Object.keys(byKind.handlers ?? {})).toEqual(['email', 'report']);
  });

  it('loadKindHandlers: each <kind>.mjs of a directory handles its kind; a directory without one, or a file whose default is no function, is a HandlerError', async () => {
    const kinds = join(dir, 'kinds');
    mkdirSync(kinds);
    writeFileSync(join(kinds, 'email.mjs'), 'export default async () => "sent";');
    writeFileSync(join(kinds, 'report.daily.js'), 'export default async () => "made";');
    writeFileSync(join(kinds, 'README.md'), 'not a handler');
    const handlers = await loadKindHandlers(kinds);
    expect(Object.keys(handlers)).toEqual(['email', 'report.daily']);
    expect(await handlers.email!({} as never, {} as never)).toBe('sent');
    const empty = join(dir, 'empty-kinds');
    mkdirSync(empty);
    await expect(loadKindHandlers(empty)).rejects.toThrow(/has no \.mjs or \.js file/);
    await expect(loadKindHandlers(join(dir, 'nowhere'))).rejects.toThrow(/handlers directory not found/);
    writeFileSync(join(kinds, 'broken.mjs'), 'export const handle = 1;');
    await expect(loadKindHandlers(kinds)).rejects.toThrow(/broken\.mjs: the default export is missing, not a function \(it handles kind "broken"\)/);
  });

  it('is a HandlerError for a missing file, no default export, a default that is not a function, a bad isAbuse, or a module that throws', async () => {
    const cases: Array<[string, RegExp]> = [
      [join(dir, 'missing.mjs'), /not found/],
      [module('no-default.mjs', 'export async function handle() {}'), /no default export/],
      [module('object.mjs', 'export default { email: 1 };'), /default export's "email" is a number, not a function/],
      [module('empty.mjs', 'export default {};'), /empty object/],
      [module('string.mjs', 'export default "handle";'), /default export is a string, not a function or an object of functions by kind/],
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
