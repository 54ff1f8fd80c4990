import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { pathToFileURL } from 'node:url';
import { adapterModuleFor, connect } from './connect.js';
import { ConfigError } from './protocol/errors.js';
import type { AdapterModule, Store } from './store/store.js';
import { JOBS_DDL, SqlJsStore } from './test/sqljs-store.js';

/** An adapter as a user would hand one over: it records what connect passed it. */
function recordingAdapter(schemes: string[]): AdapterModule & { calls: Array<{ url: string; options: unknown }> } {
  const calls: Array<{ url: string; options: unknown }> = [];
  return {
    schemes,
    calls,
    async connect(url, options) {
      calls.push({ url, options });
      return SqlJsStore.open(JOBS_DDL);
    },
  };
}

describe('connect(url)', () => {
  const opened: Store[] = [];
  const dirs: string[] = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((store) => store.close()));
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it('names the package to install for a scheme whose adapter is not installed, the password hidden', async () => {
    // Any scheme `x` is @statusq/adapter-x; none is installed for oracle: here.
    const attempt = connect('oracle://app:secret@db.example:1521/app');
    await expect(attempt).rejects.toThrow(ConfigError);
    await expect(attempt).rejects.toThrow(/^oracle:\/\/app:\*\*\*@db\.example:1521\/app needs the adapter @statusq\/adapter-oracle \(npm install @statusq\/adapter-oracle;/);
  });

  it('maps each published scheme and its aliases to the adapter package', () => {
    expect(adapterModuleFor('sqlite:./app.db')).toBe('@statusq/adapter-sqlite');
    expect(adapterModuleFor('postgres://u@h/d')).toBe('@statusq/adapter-postgres');
    expect(adapterModuleFor('PostgreSQL://u@h/d')).toBe('@statusq/adapter-postgres');
    expect(adapterModuleFor('mysql://u@h/d')).toBe('@statusq/adapter-mysql');
    expect(adapterModuleFor('mariadb://u@h/d')).toBe('@statusq/adapter-mysql');
    expect(adapterModuleFor('mariadb://u@h/d', '@acme/statusq-maria')).toBe('@acme/statusq-maria');
    expect(adapterModuleFor('lite:x', './lite.mjs')).toBe(pathToFileURL(join(process.cwd(), 'lite.mjs')).href);
  });

  it('refuses a string that is not a URL', async () => {
    await expect(connect('jobs.db')).rejects.toThrow(/unsupported database URL "jobs\.db": use sqlite:PATH/);
    await expect(connect('C:\\jobs.db')).rejects.toThrow(ConfigError);
  });

  it('uses an adapter module passed in, handing it every option but `adapter`', async () => {
    const adapter = recordingAdapter(['lite']);
    const store = await connect('LITE:q.db', { adapter, create: false, poolSize: 3 });
    opened.push(store);
    expect(adapter.calls).toEqual([{ url: 'LITE:q.db', options: { create: false, poolSize: 3 } }]);
    expect((await store.execute({ sql: 'SELECT 1 AS one', params: [] })).rows).toEqual([{ one: 1 }]);
  });

  it('refuses an adapter that does not serve the scheme, or is not an adapter', async () => {
    await expect(connect('sqlite:q.db', { adapter: recordingAdapter(['postgres', 'postgresql']) })).rejects.toThrow(
      'the adapter given as the adapter option serves postgres:, postgresql:, not sqlite: URLs',
    );
    const dir = mkdtempSync(join(tmpdir(), 'statusq-connect-'));
    dirs.push(dir);
    const plain = join(dir, 'plain.mjs');
    writeFileSync(plain, 'export const x = 1;\n');
    await expect(connect('sqlite:q.db', { adapter: plain })).rejects.toThrow(`${plain} is not a statusq adapter: it must export connect(url, options) and schemes`);
    await expect(connect('sqlite:q.db', { adapter: join(dir, 'absent.mjs') })).rejects.toThrow(/absent\.mjs \(no such file\)/);
    // A specifier no package can have is bad input too, not a stray resolver error.
    const invalid = connect('sqlite:q.db', { adapter: '@statusq' });
    await expect(invalid).rejects.toThrow(ConfigError);
    await expect(invalid).rejects.toThrow(/the adapter @statusq cannot be resolved: /);
  });

  it('loads an adapter file named by path, and says when the adapter cannot load what it imports', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'statusq-connect-'));
    dirs.push(dir);
    const sqljs = new URL('./test/sqljs-store.ts', import.meta.url).href;
    const file = join(dir, 'lite.mjs');
    writeFileSync(file, `export const schemes = ['lite'];\nexport async function connect() { const { SqlJsStore, JOBS_DDL } = await import(${JSON.stringify(sqljs)}); return SqlJsStore.open(JOBS_DDL); }\n`);
    const store = await connect('lite:x', { adapter: file });
    opened.push(store);
    expect(store.dialect.name).toBeTruthy();
    const broken = join(dir, 'broken.mjs');
    writeFileSync(broken, "import 'statusq-no-such-driver';\nexport const schemes = ['lite'];\nexport async function connect() {}\n");
    await expect(connect('lite:x', { adapter: broken })).rejects.toThrow(/the adapter .*broken\.mjs cannot load: .*statusq-no-such-driver/);
  });
});
