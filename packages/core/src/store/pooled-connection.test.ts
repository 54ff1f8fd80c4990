import { describe, expect, it } from 'vitest';
import { StoreError } from '../protocol/errors.js';
import { inTransaction, runInOrder, withPooledConnection, type PooledConnectionOps } from './pooled-connection.js';

class Conn {
  readonly sent: string[] = [];
  released: boolean[] = [];
  cut = 0;
  constructor(private readonly failing: Record<string, Error> = {}) {}
  async query(sql: string): Promise<void> {
    this.sent.push(sql);
    const error = this.failing[sql];
    if (error) throw error;
  }
}

const lost = Object.assign(new Error('socket closed'), { code: 'LOST' });
const ops: PooledConnectionOps<Conn> = {
  release: (c, wasLost) => c.released.push(wasLost),
  cut: (c) => c.cut++,
  isLost: (error) => (error as { code?: string }).code === 'LOST',
  mapError: (error) => (error instanceof StoreError ? error : new StoreError((error as { code?: string }).code === 'LOST' ? 'ConnectionLost' : 'Unknown', String(error), 'X')),
  timeoutError: (ms) => new StoreError('ConnectionLost', `no answer within ${ms} ms`, 'QUERY_TIMEOUT'),
};

describe('withPooledConnection', () => {
  it('gives the connection back once: to the pool after success and after an ordinary error, destroyed after a lost one', async () => {
    const ok = new Conn();
    expect(await withPooledConnection(ok, async () => 7, 1000, ops)).toBe(7);
    const plain = new Conn();
    await expect(withPooledConnection(plain, () => Promise.reject(new Error('syntax')), 1000, ops)).rejects.toMatchObject({ kind: 'Unknown' });
    const gone = new Conn();
    await expect(withPooledConnection(gone, () => Promise.reject(lost), 1000, ops)).rejects.toMatchObject({ kind: 'ConnectionLost' });
    expect([ok.released, plain.released, gone.released]).toEqual([[false], [false], [true]]);
  });

  it('past the deadline cuts the socket and destroys the connection before rejecting; a late answer changes nothing', async () => {
    const conn = new Conn();
    let answer!: (value: number) => void;
    const call = withPooledConnection(conn, () => new Promise<number>((resolve) => (answer = resolve)), 20, ops);
    await expect(call).rejects.toThrow('no answer within 20 ms');
    expect([conn.cut, conn.released]).toEqual([1, [true]]);
    answer(1);
    await Promise.resolve();
    expect(conn.released).toEqual([true]);
  });
});

describe('inTransaction', () => {
  it('commits after the body; rolls back and rethrows the body error', async () => {
    const conn = new Conn();
    expect(await inTransaction((sql) => conn.query(sql), async () => 'x', ops.isLost, 'START TRANSACTION')).toBe('x');
    await expect(inTransaction((sql) => conn.query(sql), () => Promise.reject(new Error('dup')), ops.isLost)).rejects.toThrow('dup');
    expect(conn.sent).toEqual(['START TRANSACTION', 'COMMIT', 'BEGIN', 'ROLLBACK']);
  });

  it('a ROLLBACK that lost the connection is the error thrown, so the caller destroys the connection', async () => {
    const conn = new Conn({ ROLLBACK: lost });
    const failed = withPooledConnection(conn, () => inTransaction((sql) => conn.query(sql), () => Promise.reject(new Error('dup')), ops.isLost), 1000, ops);
    await expect(failed).rejects.toMatchObject({ kind: 'ConnectionLost' });
    expect(conn.released).toEqual([true]);
  });

  it('after a lost connection it does not try to roll back', async () => {
    const conn = new Conn();
    await expect(inTransaction((sql) => conn.query(sql), () => Promise.reject(lost), ops.isLost)).rejects.toBe(lost);
    expect(conn.sent).toEqual(['BEGIN']);
  });
});

describe('runInOrder', () => {
  it('runs the statements in order and names the one that failed', async () => {
    const position: { failing?: number | undefined } = {};
    const ran: string[] = [];
    const run = async (s: { sql: string }) => {
      ran.push(s.sql);
      if (s.sql === 'b') throw new Error('b failed');
      return { rows: [], affected: 1 };
    };
    await expect(runInOrder(['a', 'b', 'c'].map((sql) => ({ sql, params: [] })), run, position)).rejects.toThrow('b failed');
    expect([ran, position.failing]).toEqual([['a', 'b'], 1]);
    expect(await runInOrder([{ sql: 'a', params: [] }], run, position)).toHaveLength(1);
    expect(position.failing).toBeUndefined();
  });
});
