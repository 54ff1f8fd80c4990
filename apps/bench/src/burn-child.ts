/**
 * One child of a multi-process burn-down: opens its own stores after it starts (nothing inherited from the
 * parent), reports ready, waits for "go", drains the table with its workers, reports its counters and
 * closes its connections when the parent says so.
 */
import type { Store, Worker } from '@statusq/core';
import { ownCpuSeconds } from './cpu.js';
import { connectUrl } from './databases.js';
import { createBenchWorker, deadlocksOf, runBounded, sumCounters, type ChildConfig, type ChildMessage, type Span } from './statusq-runs.js';

async function main(config: ChildConfig): Promise<void> {
  const stores: Store[] = [];
  const errors: Record<string, number> = {};
  const span: Span = { first: null, last: null };
  try {
    const workers: Worker[] = [];
    for (let i = 0; i < config.workers; i++) {
      const store = await connectUrl(config.dialect, config.url, config.connections);
      stores.push(store);
      workers.push(await createBenchWorker(store, config, true, errors, span));
    }
    const go = new Promise<void>((resolve) => process.once('message', () => resolve()));
    send({ type: 'ready' });
    await go;
    const cpuFrom = process.cpuUsage();
    const timedOut = await runBounded(workers, config.timeoutMs);
    const cpuSeconds = ownCpuSeconds(cpuFrom);
    const counters = sumCounters(workers.map((w) => w.counters));
    // Connections stay open until the parent has read the server's CPU time: their server processes keep it.
    const release = new Promise<void>((resolve) => process.once('message', () => resolve()));
    send({ type: 'done', counters, errors, cpuSeconds, span, timedOut, deadlocks: stores.reduce((n, s) => n + deadlocksOf(s), 0) });
    await release;
  } catch (error) {
    send({ type: 'done', counters: sumCounters([]), deadlocks: 0, errors, cpuSeconds: 0, span, timedOut: false, error: error instanceof Error ? error.message : String(error) });
  } finally {
    await Promise.all(stores.map((s) => s.close()));
    process.disconnect?.();
  }
}

function send(message: ChildMessage): void {
  process.send?.(message);
}

void main(JSON.parse(process.argv[2] ?? '{}') as ChildConfig);
