// `statusq dashboard` as an operator sees it: a real Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core; no browser is ever downloaded) opens the page while `statusq work` runs, over SQLite and
// PostgreSQL. The page must follow the table, and its requeue and cancel buttons must change the row in the
// database.
// Without Chromium the suite skips with `[needs chromium]`, or fails with STATUSQ_REQUIRE_DATABASES=1 (CI).
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, dropTestDatabase, postgresUnavailable, withClient } from '@statusq/adapter-postgres/testing';
import { launchCli, runCliInProcess, until, type LaunchedCli } from './test/cli-harness.js';

const CHROMIUM = process.env.STATUSQ_CHROMIUM ?? '/usr/bin/chromium';
/** Where each run's full-page screenshot goes (gitignored; CI keeps them as artifacts). */
const SCREENSHOTS = fileURLToPath(new URL('../test-artifacts/', import.meta.url));
const DOCS_SCREENSHOT = fileURLToPath(new URL('../../../docs/dashboard.png', import.meta.url));
/** Bound on every wait for the page: it polls every 2 s, so a few polls plus a slow machine. */
const PAGE_WAIT_MS = 30_000;
const ROWS = 12;

interface BrowserTestDatabase {
  url: string;
  /** The status code and last_error of row `id` of `jobs`, read outside statusq. */
  row(id: number): Promise<{ status: number | null; lastError: string | null } | undefined>;
  /** Drops `jobs`: from then on every query the dashboard runs is a database error. */
  dropJobs(): Promise<void>;
  dispose(): Promise<void>;
}

interface Target {
  dialect: string;
  unavailable: string | null;
  /** Its file in test-artifacts/; dashboard.png is the one docs/ shows. */
  screenshot: string;
  create(dir: string): Promise<BrowserTestDatabase>;
}

const statusOf = (value: unknown) => (value === null || value === undefined ? null : Number(value));
const rowOf = (row: { status: unknown; last_error: unknown } | undefined) => row && { status: statusOf(row.status), lastError: row.last_error === null ? null : String(row.last_error) };

const targets: Target[] = [
  {
    dialect: 'SQLite',
    unavailable: null,
    screenshot: 'dashboard.png',
    async create(dir) {
      const path = join(dir, 'q.db');
      return {
        url: `sqlite:${path}`,
        async row(id) {
          const conn = new Database(path, { readonly: true });
          try {
            return rowOf(conn.prepare('SELECT status, last_error FROM jobs WHERE id = ?').get(id) as { status: unknown; last_error: unknown } | undefined);
          } finally {
            conn.close();
          }
        },
        async dropJobs() {
          const conn = new Database(path);
          try {
            conn.exec('DROP TABLE jobs');
          } finally {
            conn.close();
          }
        },
        dispose: async () => undefined,
      };
    },
  },
  {
    dialect: 'PostgreSQL',
    unavailable: await postgresUnavailable(),
    screenshot: 'dashboard-postgresql.png',
    async create() {
      const url = await createTestDatabase('statusq_dash');
      return {
        url,
        row: (id) =>
          withClient(url, async (client) => rowOf((await client.query<{ status: unknown; last_error: unknown }>('SELECT status, last_error FROM jobs WHERE id = $1', [id])).rows[0])),
        dropJobs: () => withClient(url, async (client) => void (await client.query('DROP TABLE jobs'))),
        dispose: () => dropTestDatabase(url),
      };
    },
  },
];

/**
 * Row 3 always fails, row 4 fails its first attempt only (so once requeued it ends done), row 5 is abuse.
 * Rows 6-9 run until the file `release` exists, rows 10-12 until `release-late` (bounded loops, so a broken
 * test cannot leave them running): the test decides when done rows appear, and rows stay in processing for
 * the screenshot.
 */
const handler = (dir: string) => `import { existsSync, writeFileSync } from 'node:fs';
const failedOnce = ${JSON.stringify(join(dir, 'row-4-failed'))};
export default async (job, ctx) => {
  const n = job.payload.n;
  if (n === 3) throw new TypeError("Cannot read properties of undefined (reading 'email')");
  if (n === 4 && !existsSync(failedOnce)) {
    writeFileSync(failedOnce, '');
    throw new Error('upstream answered 502 Bad Gateway for row 4');
  }
  if (n === 5) return ctx.abuse('rate limit: 120 requests in a minute');
  const gate = n >= 10 ? ${JSON.stringify(join(dir, 'release-late'))} : n >= 6 ? ${JSON.stringify(join(dir, 'release'))} : null;
  for (let i = 0; gate && i < 3000 && !existsSync(gate); i++) await new Promise((r) => setTimeout(r, 20));
};`;

/** Starts `statusq dashboard` on a free port and returns it with the URL its log line names. */
async function startDashboard(dir: string, url: string, ...extra: string[]): Promise<{ run: LaunchedCli; url: string }> {
  const run = launchCli(dir, ['dashboard', '--db', url, '--table', 'jobs', '--port', '0', ...extra], 120_000);
  let stdout = '';
  run.child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  let served = '';
  await until('the dashboard URL in its log', () => {
    // Not a TTY: JSON log lines, the URL in the field `url`.
    const line = stdout.split('\n').find((l) => l.includes('"url"'));
    if (line) served = (JSON.parse(line) as { url: string }).url;
    return served !== '' || run.child.exitCode !== null;
  });
  expect(served, run.stderr()).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
  return { run, url: served };
}

/** SIGTERM, then the exit code once it has gone. */
async function stop(run: LaunchedCli): Promise<number | null> {
  if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGTERM');
  return (await run.ended).code;
}

const text = (page: Page, testId: string) => page.getByTestId(testId).first().innerText();

async function untilText(page: Page, testId: string, expected: string): Promise<void> {
  let seen = '';
  await until(`${testId} to show ${expected}`, async () => (seen = await text(page, testId).catch(() => '')) === expected, PAGE_WAIT_MS).catch(() => {
    throw new Error(`timed out waiting for ${testId} to show ${expected}; it shows ${JSON.stringify(seen)}`);
  });
}

function browserUnavailable(): string | null {
  return existsSync(CHROMIUM) ? null : `${CHROMIUM} is missing (apt-get install -y chromium, or set STATUSQ_CHROMIUM)`;
}

const required = process.env.STATUSQ_REQUIRE_DATABASES === '1';

describe('statusq dashboard in Chromium', () => {
  const missingBrowser = browserUnavailable();
  let browser: BrowserContext | null = null;
  let profile: string | null = null;

  beforeAll(async () => {
    if (missingBrowser !== null) return;
    profile = mkdtempSync(join(tmpdir(), 'statusq-chromium-'));
    // A throwaway profile (playwright passes it as --user-data-dir), and nothing that phones home or updates
    // itself: the test touches no network beyond the loopback servers it starts.
    browser = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
      viewport: { width: 1280, height: 900 },
    });
  });

  /** What the running test started, undone newest first after it, pass or fail. */
  const cleanup: Array<() => Promise<unknown>> = [];
  /** The page of the running test, photographed if the test fails (CI keeps test-artifacts/). */
  let shown: { page: Page; file: string } | null = null;
  afterEach(async ({ task }) => {
    if (task.result?.state === 'fail' && shown) {
      mkdirSync(SCREENSHOTS, { recursive: true });
      await shown.page.screenshot({ path: join(SCREENSHOTS, shown.file), fullPage: true }).catch(() => undefined);
    }
    shown = null;
    const failures: unknown[] = [];
    for (const step of cleanup.splice(0).reverse()) await step().catch((error: unknown) => failures.push(error));
    if (failures.length > 0) throw failures[0];
  });

  afterAll(async () => {
    await browser?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  for (const target of targets) {
    const title = `${target.dialect}: the page follows work, shows failures with their errors, and its confirmed requeue changes the row in the database, as does its cancel of a pending row with a reason; read-only shows no action; a lost database is a banner`;
    const unavailable = missingBrowser ?? target.unavailable;
    if (unavailable !== null) {
      if (required) {
        it(`${target.dialect}: Chromium and the database are there (STATUSQ_REQUIRE_DATABASES=1)`, () => {
          throw new Error(unavailable);
        });
      } else {
        it.skip(`[needs ${missingBrowser ? 'chromium' : target.dialect.toLowerCase()}] ${title}: ${unavailable}`, () => undefined);
      }
      continue;
    }

    it(title, async () => {
      const dir = mkdtempSync(join(tmpdir(), `statusq-dash-${target.dialect.toLowerCase()}-`));
      cleanup.push(async () => rmSync(dir, { recursive: true, force: true }));
      const db = await target.create(dir);
      cleanup.push(() => db.dispose());
      const statusq = (...args: string[]) => runCliInProcess(dir, args);
      expect((await statusq('init', '--db', db.url)).code).toBe(0);
      const rows = Array.from({ length: ROWS }, (_, i) => JSON.stringify({ n: i + 1 })).join('\n');
      writeFileSync(join(dir, 'rows.ndjson'), rows);
      expect((await statusq('enqueue', '--db', db.url, '--file', join(dir, 'rows.ndjson'))).code).toBe(0);
      writeFileSync(join(dir, 'handler.mjs'), handler(dir));

      const dashboard = await startDashboard(dir, db.url);
      cleanup.push(() => stop(dashboard.run));
      // Enough concurrency to claim every row at once: the gated rows wait in processing, the others settle.
      const work = launchCli(dir, ['work', '--db', db.url, '--table', 'jobs', '--handler', join(dir, 'handler.mjs'), '--concurrency', String(ROWS + 4), '--max-attempts', '1', '--lease', '30s']);
      const stopWorker = () => {
        writeFileSync(join(dir, 'release'), '');
        writeFileSync(join(dir, 'release-late'), '');
        return stop(work);
      };
      cleanup.push(stopWorker);

      const page = await browser!.newPage();
      cleanup.push(() => page.close());
      shown = { page, file: `failed-${target.screenshot}` };
      const pageErrors: string[] = [];
      page.on('pageerror', (error) => pageErrors.push(error.message));
      await page.goto(dashboard.url);

      // Before the gate opens: rows 1-2 done, 3 and 4 failed, 5 abuse, 6-12 held in processing.
      await untilText(page, 'count-failed', '2');
      await untilText(page, 'count-done', '2');
      await untilText(page, 'count-processing', '7');
      await expect.poll(() => page.getByTestId('processing-row').count(), { timeout: PAGE_WAIT_MS }).toBe(7);
      const failedRow = page.locator('[data-testid="failed-row"][data-id="4"]');
      await failedRow.waitFor({ timeout: PAGE_WAIT_MS });
      expect(await failedRow.getByTestId('last-error').innerText()).toContain('upstream answered 502 Bad Gateway for row 4');
      // A table without a kind column has no table by kind.
      expect(await page.getByTestId('kinds').count()).toBe(0);
      expect(await page.locator('[data-testid="abuse-row"][data-id="5"]').innerText()).toContain('rate limit: 120 requests in a minute');

      // The gate opens: the done count the page shows goes up by the four released rows.
      writeFileSync(join(dir, 'release'), '');
      await untilText(page, 'count-done', '6');
      await untilText(page, 'count-processing', '3');

      // Asked, then cancelled with Escape: nothing is sent (row 5 is still abuse at the end).
      await page.getByTestId('requeue-all-abuse').click();
      const dialog = page.getByTestId('confirm-dialog');
      await dialog.waitFor({ state: 'visible' });
      expect(await dialog.innerText()).toContain('Requeue all abuse rows?');
      await page.keyboard.press('Escape');
      await dialog.waitFor({ state: 'hidden' });

      // Requeue row 4 from the page: a dialog asks first, then the result is shown.
      await failedRow.getByRole('button', { name: 'Requeue failed row 4' }).click();
      await dialog.waitFor({ state: 'visible' });
      expect(await dialog.innerText()).toContain('Requeue failed row 4?');
      await dialog.getByTestId('confirm-ok').click();
      await until('the requeue result', async () => (await text(page, 'action-result')).includes('Requeued 1 failed row'), PAGE_WAIT_MS);
      expect(await dialog.isVisible()).toBe(false);

      // The database, not only the page: row 4 left failed, and the running worker did it again (its
      // second attempt succeeds).
      await until('row 4 done in the database', async () => (await db.row(4))?.status === 1, PAGE_WAIT_MS);
      expect(await db.row(3)).toMatchObject({ status: 0 });
      expect(await db.row(5)).toMatchObject({ status: 2 });
      await untilText(page, 'count-done', '7');
      await untilText(page, 'count-failed', '1');
      expect(await failedRow.count()).toBe(0);
      // Running rows offer a cancel too; nothing waits, so the pending card is empty.
      expect(await page.getByRole('button', { name: 'Cancel processing row 10' }).count()).toBe(1);
      expect(await text(page, 'pending')).toContain('No row is waiting.');

      mkdirSync(SCREENSHOTS, { recursive: true });
      const screenshot = join(SCREENSHOTS, target.screenshot);
      await page.screenshot({ path: screenshot, fullPage: true });
      if (process.env.STATUSQ_UPDATE_SCREENSHOT === '1' && target.screenshot === 'dashboard.png') copyFileSync(screenshot, DOCS_SCREENSHOT);

      // Read-only: the same table, every action gone.
      const readOnly = await startDashboard(dir, db.url, '--read-only');
      cleanup.push(() => stop(readOnly.run));
      const view = await browser!.newPage();
      cleanup.push(() => view.close());
      await view.goto(readOnly.url);
      await untilText(view, 'count-failed', '1');
      expect(await view.getByTestId('read-only').isVisible()).toBe(true);
      expect(await view.locator('[data-testid="failed-row"][data-id="3"]').isVisible()).toBe(true);
      expect(await view.getByRole('button').count()).toBe(0);

      // A phone-sized window: everything fits its width (wide tables scroll inside their own box).
      await view.setViewportSize({ width: 390, height: 844 });
      await expect.poll(() => view.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth'), { timeout: PAGE_WAIT_MS }).toBeLessThanOrEqual(0);
      await view.screenshot({ path: join(SCREENSHOTS, `narrow-${target.screenshot}`), fullPage: true });

      // The database goes away under the page: the API answers 503 and the page says so, keeping its figures.
      // The worker stops first, its last three rows released: every row but 3 (failed) and 5 (abuse) done.
      await stopWorker();
      await untilText(page, 'count-done', '10');

      // With no worker left, a row enqueued now waits: cancel it from the page, with a reason. The dialog
      // asks first, the result names the row, and the database has it failed with that reason.
      expect((await statusq('enqueue', '--db', db.url, '--payload', '{"n":13}')).code).toBe(0);
      const pendingRow = page.locator('[data-testid="pending-row"][data-id="13"]');
      await pendingRow.waitFor({ timeout: PAGE_WAIT_MS });
      await pendingRow.getByRole('button', { name: 'Cancel pending row 13' }).click();
      await dialog.waitFor({ state: 'visible' });
      expect(await dialog.innerText()).toContain('Cancel pending row 13?');
      await dialog.getByTestId('cancel-reason').fill('customer withdrew the order');
      await page.screenshot({ path: join(SCREENSHOTS, `cancel-dialog-${target.screenshot}`) });
      await dialog.getByTestId('confirm-ok').click();
      await until('the cancel result', async () => (await text(page, 'action-result')).includes('Cancelled 1 pending row'), PAGE_WAIT_MS);
      expect(await page.locator('[data-testid="cancel-results"] li[data-id="13"]').getAttribute('data-outcome')).toBe('cancelled');
      expect(await dialog.isVisible()).toBe(false);
      expect(await db.row(13)).toEqual({ status: 0, lastError: 'cancelled: customer withdrew the order' });
      await untilText(page, 'count-failed', '2');
      expect(await page.locator('[data-testid="failed-row"][data-id="13"]').getByTestId('last-error').innerText()).toBe('cancelled: customer withdrew the order');
      expect(await pendingRow.count()).toBe(0);
      expect(await text(page, 'count-pending')).toBe('0');
      await page.screenshot({ path: join(SCREENSHOTS, `cancelled-${target.screenshot}`), fullPage: true });

      await db.dropJobs();
      const banner = page.getByTestId('banner');
      await banner.waitFor({ timeout: PAGE_WAIT_MS });
      expect(await banner.getAttribute('data-kind')).toBe('database');
      expect(await banner.innerText()).toContain('The database is not answering (503)');
      expect(await text(page, 'count-done')).toBe('10');
      expect(await page.getByTestId('requeue-row').count()).toBe(0);
      expect(await page.getByTestId('cancel-row').count()).toBe(0);
      expect(pageErrors).toEqual([]);
    });
  }

  const sqlite = targets[0]!;
  const kindsTitle = `${sqlite.dialect}: on a table with kinds the page counts rows by kind, follows a worker that handles one kind, and marks the kind that waits with none processing`;
  if (missingBrowser !== null) {
    if (!required) it.skip(`[needs chromium] ${kindsTitle}: ${missingBrowser}`, () => undefined);
  } else {
    it(kindsTitle, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'statusq-dash-kinds-'));
      cleanup.push(async () => rmSync(dir, { recursive: true, force: true }));
      const db = await sqlite.create(dir);
      const statusq = (...args: string[]) => runCliInProcess(dir, args);
      expect((await statusq('init', '--db', db.url, '--with', 'kinds')).code).toBe(0);
      for (const kind of ['email', 'email', 'email', 'archive']) expect((await statusq('enqueue', '--db', db.url, '--kind', kind, '--payload', '{}')).code).toBe(0);
      const dashboard = await startDashboard(dir, db.url);
      cleanup.push(() => stop(dashboard.run));
      const page = await browser!.newPage();
      cleanup.push(() => page.close());
      shown = { page, file: 'failed-kinds-dashboard.png' };
      const pageErrors: string[] = [];
      page.on('pageerror', (error) => pageErrors.push(error.message));
      await page.goto(dashboard.url);

      await untilText(page, 'kind-email-pending', '3');
      expect(await text(page, 'kind-archive-pending')).toBe('1');
      expect(await page.getByTestId('kind-archive').getAttribute('class')).toBe('waiting');

      // A worker with a handler for email only: the emails end done, the archive row still waits, marked.
      const handlers = join(dir, 'handlers');
      mkdirSync(handlers);
      writeFileSync(join(handlers, 'email.mjs'), 'export default async () => undefined;');
      expect((await statusq('work', '--db', db.url, '--table', 'jobs', '--handlers', handlers, '--exit-when-empty', '--poll-max', '50ms')).code).toBe(0);
      await untilText(page, 'kind-email-done', '3');
      expect(await text(page, 'kind-email-pending')).toBe('0');
      expect(await page.getByTestId('kind-email').getAttribute('class')).toBeNull();
      expect(await text(page, 'kind-archive-pending')).toBe('1');
      expect(await page.getByTestId('kind-archive').innerText()).toContain('(none processing)');
      mkdirSync(SCREENSHOTS, { recursive: true });
      await page.screenshot({ path: join(SCREENSHOTS, 'kinds-dashboard.png'), fullPage: true });
      expect(pageErrors).toEqual([]);
    });
  }
});
