// statusq_queue_kind_rows as refreshQueueRows keeps it, on vitest's fake clock: every kind seen stays a series,
// and one whose live rows are gone reads 0, so an alert on it resolves rather than going stale.
import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { Registry } from 'prom-client';
import pino from 'pino';
import type { MonitoringCounts } from '@statusq/core/tools';
import { WorkerMetrics, kindRowsGauge, refreshQueueRows } from './metrics.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

it('sets each kind\'s pending and processing rows at every refresh, and 0 for a kind whose rows are gone', async () => {
  const reads: Array<Record<string, { pending: number; processing: number }>> = [{ email: { pending: 2, processing: 1 }, '': { pending: 1, processing: 0 } }, { email: { pending: 0, processing: 1 } }];
  let read = 0;
  const queue = {
    monitoringCounts: async (): Promise<MonitoringCounts> => ({ counts: { pending: 3, processing: 1, done: 0, abuse: 0, failed: 0, other: 0 }, estimated: [] }),
    liveCountsByKind: async () => reads[Math.min(read++, reads.length - 1)]!,
  };
  const metrics = new WorkerMetrics();
  const gauge = kindRowsGauge(metrics.registry);
  const stop = refreshQueueRows(queue, metrics.queueRows, 'jobs', pino({ level: 'silent' }), 1_000, gauge);
  const values = async () => Object.fromEntries((await gauge.get()).values.map((v) => [`${String(v.labels.kind)}/${String(v.labels.status)}`, v.value]));
  try {
    await vi.advanceTimersByTimeAsync(0);
    expect(await values()).toEqual({ 'email/pending': 2, 'email/processing': 1, '/pending': 1, '/processing': 0 });
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await values()).toEqual({ 'email/pending': 0, 'email/processing': 1, '/pending': 0, '/processing': 0 });
  } finally {
    stop();
  }
});

it('is registered only where it is made: a registry without it exposes no line of it', async () => {
  expect(await new WorkerMetrics().registry.metrics()).not.toContain('statusq_queue_kind_rows');
  const registry = new Registry();
  kindRowsGauge(registry);
  expect(await registry.metrics()).toContain('# TYPE statusq_queue_kind_rows gauge');
});
