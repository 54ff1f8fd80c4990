import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../protocol/errors.js';
import { Queue } from '../queue/queue.js';
import { COLUMN_GROUPS, initTable, migrateTable, parseColumnGroups, pendingIndexName } from './schema.js';
import type { ColumnKind, ColumnSpec, SchemaSupport } from '../store/store.js';
import { SqlJsStore } from '../test/sqljs-store.js';

// initTable / migrateTable decide what to create; a SchemaSupport only spells it. This one spells it in
// plain SQLite SQL with no DDL library, as any adapter may, and runs on the in-memory sql.js store.
const SQL_TYPES: Readonly<Record<ColumnKind, string>> = {
  serialKey: 'INTEGER PRIMARY KEY AUTOINCREMENT',
  time: 'INTEGER',
  integer: 'INTEGER',
  bigInteger: 'BIGINT',
  token: 'VARCHAR(255)',
  text: 'TEXT',
  longText: 'TEXT',
};

function plainSqlSchema(store: SqlJsStore, calls: string[]): SchemaSupport {
  const q = (name: string) => store.dialect.quoteIdentifier(name);
  const column = (c: ColumnSpec) =>
    [q(c.name), SQL_TYPES[c.kind], c.kind === 'serialKey' ? '' : c.nullable ? 'NULL' : 'NOT NULL', c.default === 'now' ? `DEFAULT (${store.dialect.now})` : c.default === 0 ? 'DEFAULT 0' : '']
      .filter(Boolean)
      .join(' ');
  return {
    async createTable(table, columns) {
      calls.push(`createTable ${table}: ${columns.map((c) => `${c.name} ${c.kind}${c.nullable ? '?' : ''}${c.default === undefined ? '' : `=${c.default}`}`).join(', ')}`);
      return [{ sql: `CREATE TABLE ${q(table)} (${columns.map(column).join(', ')})`, params: [] }];
    },
    async addColumns(table, columns) {
      calls.push(`addColumns ${table}: ${columns.map((c) => c.name).join(', ')}`);
      return columns.map((c) => ({ sql: `ALTER TABLE ${q(table)} ADD COLUMN ${column(c)}`, params: [] }));
    },
    async createPendingIndex(table, index) {
      calls.push(`createPendingIndex ${table}: ${index.name} (${index.statusColumn}, ${index.orderColumn})`);
      return [{ sql: `CREATE INDEX ${q(index.name)} ON ${q(table)} (${q(index.statusColumn)}, ${q(index.orderColumn)})`, params: [] }];
    },
    async createKeyIndex(table, index) {
      calls.push(`createKeyIndex ${table}: ${index.name} (${index.keyColumn} live at ${index.statusColumn} NULL or ${index.processingCode})`);
      const live = `${q(index.keyColumn)} IS NOT NULL AND (${q(index.statusColumn)} IS NULL OR ${q(index.statusColumn)} = ${index.processingCode})`;
      return [{ sql: `CREATE UNIQUE INDEX ${q(index.name)} ON ${q(table)} (${q(index.keyColumn)}) WHERE ${live}`, params: [] }];
    },
    indexNames: (_schema, table) => ({ sql: `SELECT upper(name) AS name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?`, params: [table] }),
    async installWakeUps(wakeStore, table, statusColumn) {
      calls.push(`installWakeUps ${table}.${statusColumn} on ${wakeStore === store ? 'the store' : 'another store'}`);
    },
  };
}

let open: SqlJsStore | null = null;
afterEach(async () => {
  await open?.close();
  open = null;
});

async function storeWithSchema(ddl = 'SELECT 1'): Promise<{ store: SqlJsStore & { schema: SchemaSupport }; calls: string[] }> {
  const calls: string[] = [];
  open = await SqlJsStore.open(ddl);
  return { store: Object.assign(open, { schema: plainSqlSchema(open, calls) }), calls };
}

describe('initTable and migrateTable over a SchemaSupport', () => {
  it('init creates the managed columns in order with their kinds, the pending index and the wake-ups; the table opens with every feature; a second init adds nothing', async () => {
    const { store, calls } = await storeWithSchema();
    expect(await initTable(store, 'jobs')).toEqual({ table: 'jobs', created: true, migrated: null });
    expect(calls).toEqual([
      'createTable jobs: id serialKey, date time=now, status integer?, payload longText?, claimed_at time?, worker_id token?, attempt_count integer=0, next_attempt_at time?, last_error text?, result longText?, finished_at time?, dedupe_key token?',
      'createPendingIndex jobs: jobs_statusq_pending (status, date)',
      'createKeyIndex jobs: jobs_statusq_key (dedupe_key live at status NULL or 9)',
      'installWakeUps jobs.status on the store',
    ]);
    const queue = await Queue.open(store, { table: 'jobs' });
    expect(queue.table.features).toEqual({ leases: true, fencing: true, retries: true, backoff: true, errorHistory: true, priority: false, dedupe: true, progress: false, dispatch: false, kinds: false, groups: false, tracing: false });
    expect(await queue.enqueue([{ n: 1 }])).toHaveLength(1);
    expect(store.rows('SELECT status, attempt_count, date > 0 AS dated FROM jobs')).toEqual([{ status: null, attempt_count: 0, dated: 1 }]);

    calls.length = 0;
    // The index is found though the listing spells it in upper case.
    expect(await initTable(store, 'jobs')).toEqual({ table: 'jobs', created: false, migrated: { table: 'jobs', addedColumns: [], createdIndex: null, createdPriorityIndex: null, createdKeyIndex: null, createdDispatchIndex: null, createdKindIndex: null, createdGroupIndex: null, addedStatus: false, beside: null } });
    expect(calls).toEqual(['installWakeUps jobs.status on the store']);
  });

  it('migrate adds a missing status column first, then only the missing columns of the chosen groups; existing rows become pending', async () => {
    const { store, calls } = await storeWithSchema('CREATE TABLE legacy (id INTEGER PRIMARY KEY, created INTEGER NOT NULL, worker_id TEXT); INSERT INTO legacy VALUES (1, 10, NULL), (2, 20, NULL)');
    const report = await migrateTable(store, { table: 'legacy', orderColumn: 'created', with: parseColumnGroups('leases, results') });
    expect(report).toEqual({ table: 'legacy', addedColumns: ['status', 'claimed_at', 'result', 'finished_at'], createdIndex: 'legacy_statusq_pending', createdPriorityIndex: null, createdKeyIndex: null, createdDispatchIndex: null, createdKindIndex: null, createdGroupIndex: null, addedStatus: true, beside: null });
    expect(calls).toEqual([
      'addColumns legacy: status, claimed_at, result, finished_at',
      'createPendingIndex legacy: legacy_statusq_pending (status, created)',
      'installWakeUps legacy.status on the store',
    ]);
    expect(store.rows('SELECT id, status FROM legacy ORDER BY id')).toEqual([
      { id: 1, status: null },
      { id: 2, status: null },
    ]);
    calls.length = 0;
    expect(await migrateTable(store, { table: 'legacy', orderColumn: 'created', with: ['leases', 'results'] })).toEqual({ table: 'legacy', addedColumns: [], createdIndex: null, createdPriorityIndex: null, createdKeyIndex: null, createdDispatchIndex: null, createdKindIndex: null, createdGroupIndex: null, addedStatus: false, beside: null });
    expect(calls).toEqual(['installWakeUps legacy.status on the store']);
  });

  it('a store without schema support is a ConfigError naming its dialect; names are checked first and nothing reaches the store', async () => {
    open = await SqlJsStore.open('CREATE TABLE jobs (id INTEGER PRIMARY KEY, date INTEGER)');
    const statements: string[] = [];
    open.beforeRun = (s) => statements.push(...s.map((x) => x.sql));
    await expect(initTable(open, 'jobs')).rejects.toThrow(new ConfigError('the sql.js store cannot create or change tables (it has no schema support); create the table yourself'));
    await expect(migrateTable(open, { table: 'jobs' })).rejects.toBeInstanceOf(ConfigError);
    await expect(initTable(open, 'bad-name')).rejects.toThrow(/invalid table name "bad-name"/);
    await expect(migrateTable(open, { table: 'jobs', with: ['leases', 'nope' as never] })).rejects.toThrow(/unknown column group "nope"; use leases, retries, results/);
    expect(statements).toEqual([]);
  });
});

describe('names and groups', () => {
  it('pendingIndexName: short names as they are; long ones cut to 63 characters with a stable hash that tells tables apart', () => {
    expect(pendingIndexName('jobs')).toBe('jobs_statusq_pending');
    expect(pendingIndexName('app.jobs')).toBe('app_jobs_statusq_pending');
    const a = pendingIndexName(`${'a'.repeat(50)}_one`);
    const b = pendingIndexName(`${'a'.repeat(50)}_two`);
    expect(a.length).toBeLessThanOrEqual(63);
    expect(a).toMatch(/^a{50}_[0-9a-z]+$/);
    expect(a).not.toBe(b);
    expect(pendingIndexName(`${'a'.repeat(50)}_one`)).toBe(a);
  });

  it('parseColumnGroups: a comma list or an array, trimmed and deduplicated; unknown groups are a ConfigError', () => {
    expect(parseColumnGroups(undefined)).toEqual([]);
    expect(parseColumnGroups(' leases ,retries,leases,')).toEqual(['leases', 'retries']);
    expect(parseColumnGroups(Object.keys(COLUMN_GROUPS))).toEqual(['leases', 'retries', 'results', 'delays', 'priority', 'dedupe', 'progress', 'dispatch', 'kinds', 'groups', 'tracing', 'await']);
    expect(() => parseColumnGroups('leases,everything')).toThrow(ConfigError);
  });
});
