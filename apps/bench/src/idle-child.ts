/**
 * The idle worker of the idle-pickup scenario, in a process of its own, so the CPU it is charged is a waiting
 * worker's and nothing else's: the bench's own process holds the peers' modules and connections, which cost
 * more while idle (measured: ~1.2% of a core after the BullMQ peer's Redis check) than the worker being
 * measured. It opens its store after it starts, reports ready, and then answers the parent: `cpu-start` /
 * `cpu-end` bracket the idle window (it replies with its CPU seconds in between), each job it runs is
 * reported with the wall-clock time its handler started, and `stop` ends it.
 */
import { Worker } from '@statusq/core';
import { ownCpuSeconds } from './cpu.js';
import { connectUrl } from './databases.js';
import { wallClockMs, type IdleChildConfig, type IdleChildMessage, type IdleParentMessage } from './idle-pickup.js';

async function main(config: IdleChildConfig): Promise<void> {
  const store = await connectUrl(config.dialect, config.url, { listen: config.listen });
  try {
    const worker = await Worker.create({
      store,
      table: { table: config.table },
      concurrency: config.concurrency,
      ...(config.pollMaxMs !== undefined && { pollMaxMs: config.pollMaxMs }),
      handler: (job) => send({ type: 'ran', seq: Number(job.payload), at: wallClockMs() }),
    });
    const running = worker.run();
    let cpuFrom: NodeJS.CpuUsage | null = null;
    const stop = new Promise<void>((resolve) => {
      process.on('message', (message: IdleParentMessage) => {
        if (message === 'cpu-start') cpuFrom = process.cpuUsage();
        else if (message === 'cpu-end' && cpuFrom) send({ type: 'cpu', seconds: ownCpuSeconds(cpuFrom) });
        else if (message === 'stop') resolve();
      });
    });
    send({ type: 'ready' });
    await stop;
    await worker.stop(1_000);
    await running;
  } finally {
    await store.close();
    send({ type: 'stopped' });
    process.disconnect?.();
  }
}

function send(message: IdleChildMessage): void {
  process.send?.(message);
}

void main(JSON.parse(process.argv[2] ?? '{}') as IdleChildConfig);
