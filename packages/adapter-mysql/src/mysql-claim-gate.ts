import { StoreError, type ExecResult, type ResolvedTable, type StatementRunner, type StoreWarning } from '@statusq/core/adapter';
import { toStoreError } from './mysql-errors.js';

/**
 * The claim gate (issue 41): at most `width` native claims of one table run at once on the server, whichever
 * store, process or host they come from. Each claim takes one of `width` named locks (GET_LOCK, chosen at
 * random) after its START TRANSACTION and gives it back (RELEASE_LOCK) after its UPDATE, before the COMMIT:
 *
 *   START TRANSACTION
 *   SELECT GET_LOCK('statusq.claim.<sha1 of database.table>.<k>', 1)      waits, sleeping, while k is held
 *   SELECT ... FOR UPDATE SKIP LOCKED;  UPDATE ... WHERE id IN (...)      (mysql-claim-sql.ts)
 *   DO RELEASE_LOCK(...)
 *   COMMIT
 *
 * Why. MariaDB's claim collapses with the number of concurrent claimers, not with the rows they claim: the raw
 * claim loop (this transaction without the gate, 50 rows a claim, each connection settling its batch in one
 * UPDATE, 20,000 rows) on MariaDB 10.11, 2 cores, one connection per claimer: 1 claimer 9,430 jobs/s, 8 15,744,
 * 16 11,357, 32 8,489, 64 5,931, 128 419 (the server at both cores, 5.4 ms of its CPU per job against 0.11 at
 * 8). No row lock waits, no deadlocks, and the index reads per job hardly grow (Handler_read_prev 0.98 at
 * every count; buffer pool page reads 163 -> 619 a job). `perf` on mariadbd at 128 claimers: a fifth of the
 * samples in InnoDB's latch spin loops (`pause`), a sixth in the kernel switching threads: every claimer
 * reads and writes the same few pages at the hot end of the pending index, and with more threads than cores
 * the latch holder is descheduled while the rest spin. Gated (this file, 8 locks; same run): 8 claimers
 * 14,043, 32 13,544, 128 13,026. 2 locks: 10,665 / 10,668 / 12,913; 4: 12,754 at 8, 12,030 at 128. A
 * claimer waiting for the gate sleeps on the server (a metadata lock wait), which costs nothing while the
 * claimers inside work. Gating the settles as well changed nothing (11,834 against 11,916 at 128).
 *
 * What it costs: no round trip where the claim's statements travel in multi-statement packets (GET_LOCK with
 * the candidate SELECT, RELEASE_LOCK with the COMMIT; mysql-pipeline.ts), two more per claim where they do not;
 * and while more than `width` claimers want the same table at once, the rest wait their turn. It changes no
 * order and no guarantee: the guarded UPDATE still decides every row, and a claim that waited past
 * GATE_WAIT_SECONDS (a holder far away or stalled) runs without the gate rather than wait longer.
 *
 * PostgreSQL needs none: its raw claim goes from 54,117 jobs/s at 8 claimers to 41,196 at 64 with no collapse,
 * and the same gate there (pg_advisory_xact_lock) made 64 claimers slower (19,031).
 *
 * A server that refuses GET_LOCK (MariaDB Galera with wsrep_on has refused it since 10.4.29/10.6.13 with 1235,
 * MDEV-30473; a proxy may block it) is found when the store opens (probeClaimGate): the store then claims
 * without a gate and says so once (MysqlStoreOptions.onWarning, code `claim-gate-refused`, which `statusq work`
 * logs; `statusq doctor` shows it too). A refusal met later turns the gate off the same way.
 */
export const DEFAULT_CLAIM_GATE_WIDTH = 8;
/** The longest a claim waits for the gate, in seconds; past it, the claim runs ungated. */
export const GATE_WAIT_SECONDS = 1;
/**
 * The lock name: MySQL allows 64 characters, so the table is named by a hash, which also keeps quotes and
 * unicode in table names out of the name. Built on the server from DATABASE(), so two databases' tables of
 * one name do not share a gate.
 */
const LOCK_NAME_SQL = "CONCAT('statusq.claim.', LEFT(SHA1(CONCAT(COALESCE(DATABASE(), ''), '.', ?)), 24), '.', ?)";

/** Counters of the gate, on MysqlStore.stats. */
export interface ClaimGateStats {
  /** Claims that ran without the gate after waiting GATE_WAIT_SECONDS for it. */
  claimGateTimeouts: number;
}

export class MysqlClaimGate {
  /** Why the gate is off although asked for (the server refused GET_LOCK); null while it works. */
  private refusal: string | null = null;

  constructor(
    /** How many claims of one table may run at once; 0: no gate. */
    readonly width: number,
    private readonly stats: ClaimGateStats,
    /** MysqlStoreOptions.onWarning: told once when the server refuses the gate. */
    private readonly warn: (warning: StoreWarning) => void,
  ) {}

  /** Whether claims take the gate now. */
  get active(): boolean {
    return this.width > 0 && this.refusal === null;
  }

  /** Why the server refused the gate, or null. */
  get offBecause(): string | null {
    return this.refusal;
  }

  /**
   * NativeClaim.admit: `claim` runs holding one of the table's gate locks when the server grants one in time.
   * In a pipelined transaction (StatementRunner.defer, mysql-pipeline.ts) GET_LOCK travels with the candidate
   * SELECT and RELEASE_LOCK with the COMMIT, so the gate adds no round trip.
   */
  async admit<T>(table: ResolvedTable, tx: StatementRunner, claim: () => Promise<T>): Promise<T> {
    if (!this.active) return claim();
    const params = [table.table, Math.floor(Math.random() * this.width)];
    const acquire = { sql: `SELECT GET_LOCK(${LOCK_NAME_SQL}, ?) AS held`, params: [...params, GATE_WAIT_SECONDS] };
    const release = { sql: `DO RELEASE_LOCK(${LOCK_NAME_SQL})`, params };
    const granted = (result: ExecResult) => {
      const held = Number(result.rows[0]?.held) === 1;
      if (!held) this.stats.claimGateTimeouts++;
      return held;
    };
    if (tx.defer) {
      // A failed packet rolls back with every named lock released (mysql-pipeline.ts): nothing to give back here.
      const lock = tx.defer(acquire).then(granted);
      lock.catch(() => undefined);
      let result: T;
      try {
        result = await claim();
      } catch (error) {
        // The refusal of GET_LOCK itself fails its packet: the claim's retry goes ungated.
        if (isGateRefusal(error)) this.refuse(error);
        throw error;
      }
      // Sent whether the lock was granted or not (RELEASE_LOCK of a lock another session holds changes nothing):
      // a claim that sends everything with its COMMIT (NativeClaim.idsOnServer) has heard nothing back yet.
      void tx.defer(release);
      return result;
    }
    let held = false;
    try {
      held = granted(await tx.execute(acquire));
    } catch (error) {
      // A statement that fails leaves a MySQL transaction open and usable: the claim goes on without the gate.
      if (!isGateRefusal(error)) throw error;
      this.refuse(error);
    }
    if (!held) return claim();
    // The lock belongs to the session, not the transaction: a claim that fails still gives it back, or the
    // pooled connection would keep it. A release that fails has lost its connection (the server frees the
    // lock with it), or fails the claim, which rolls back and is retried.
    let result: T;
    try {
      result = await claim();
    } catch (error) {
      await tx.execute(release).catch(() => undefined);
      throw error;
    }
    await tx.execute(release);
    return result;
  }

  /** Turns the gate off for the rest of this store's life, saying why once. */
  refuse(error: unknown): void {
    if (this.refusal !== null) return;
    this.refusal = `the server refused GET_LOCK (${messageOf(error)})`;
    this.warn({
      code: 'claim-gate-refused',
      message: `claims run without the claim gate: ${this.refusal}; many claimers of one table may then slow each other down (docs/benchmarks.md, "Many claimers on MariaDB")`,
      fix: 'keep the claimers of one table to a few dozen, or run them where GET_LOCK is allowed; claimGate=0 (URL ?claimGate=0) asks for no gate and silences this',
    });
  }
}

function messageOf(error: unknown): string {
  const mapped = toStoreError(error);
  return mapped instanceof Error ? mapped.message : String(mapped);
}

/**
 * Whether GET_LOCK failed because the server (or a proxy) will not run it, as opposed to a lost connection or
 * a deadline, which the claim's own error handling deals with.
 */
function isGateRefusal(error: unknown): boolean {
  const mapped = toStoreError(error);
  if (!(mapped instanceof StoreError) || (mapped.kind !== 'Unsupported' && mapped.kind !== 'Unknown')) return false;
  // A refusal names the function (MariaDB Galera: 1235 "... 'GET_LOCK in cluster (WSREP_ON=ON)'"); any other
  // error (a query killed while it waited, 1317; the SELECT that shared its packet) is the claim's own and
  // leaves the gate on.
  return /GET_LOCK/i.test(mapped.message);
}

/**
 * Asks the server once, at open, whether it grants named locks (a lock no claim uses, taken without waiting
 * and given back). A refusal turns the gate off before the first claim.
 */
export async function probeClaimGate(gate: MysqlClaimGate, query: (sql: string) => Promise<unknown>): Promise<void> {
  if (!gate.active) return;
  try {
    await query("SELECT GET_LOCK('statusq.claim.probe', 0), RELEASE_LOCK('statusq.claim.probe')");
  } catch (error) {
    if (!isGateRefusal(error)) throw error;
    gate.refuse(error);
  }
}
