/**
 * One child of a burn-down run in processes of their own: drains its share of the warm-up table first when
 * there is one (untimed), opens its own stores (nothing inherited from the parent), reports ready, waits for
 * "go", drains the table with its workers, reports its counters and closes its connections when the parent
 * says so.
 */
import { ownCpuSeconds } from './cpu.js';
import { connectUrl } from './databases.js';
import { BenchWorkers, sumCounters, type ChildConfig, type ChildMessage } from './statusq-runs.js';

async function main(config: ChildConfig): Promise<void> {
  const bench = new BenchWorkers();
  try {
    if (config.warmUpTable) {
      // Untimed: the same workers and settings over a table of their own, so the run below starts on warm code.
      const warmUp = new BenchWorkers();
      try {
        await warmUp.open(() => connectUrl(config.dialect, config.url, config.connections), { ...config, table: config.warmUpTable });
        await warmUp.run(config.timeoutMs);
      } finally {
        await warmUp.close();
      }
    }
    await bench.open(() => connectUrl(config.dialect, config.url, config.connections), config);
    const go = new Promise<void>((resolve) => process.once('message', () => resolve()));
    send({ type: 'ready' });
    await go;
    const cpuFrom = process.cpuUsage();
    const timedOut = await bench.run(config.timeoutMs);
    const cpuSeconds = ownCpuSeconds(cpuFrom);
    // Connections stay open until the parent has read the server's CPU time: their server processes keep it.
    const release = new Promise<void>((resolve) => process.once('message', () => resolve()));
    send({ type: 'done', counters: bench.counters(), errors: bench.errors, cpuSeconds, span: bench.span, timedOut, deadlocks: bench.deadlocks() });
    await release;
  } catch (error) {
    send({ type: 'done', counters: sumCounters([]), deadlocks: 0, errors: bench.errors, cpuSeconds: 0, span: bench.span, timedOut: false, error: error instanceof Error ? error.message : String(error) });
  } finally {
    await bench.close();
    process.disconnect?.();
  }
}

function send(message: ChildMessage): void {
  process.send?.(message);
}

void main(JSON.parse(process.argv[2] ?? '{}') as ChildConfig);
