/** NATS JetStream as the broker conformance suite drives it: the shared server, and private ones it restarts and kills. */
import { fileURLToPath } from 'node:url';
import type { BrokerUnderTest } from '@statusq/conformance';
import { NATS_TEST_URL, PrivateNats, readDeadLetters, deleteQueueStreams, natsUnavailable, privateNatsUnavailable } from '../testing.js';

export const natsUnderTest: BrokerUnderTest = {
  name: 'nats',
  brokerModule: fileURLToPath(new URL('../../dist/index.js', import.meta.url)),
  url: NATS_TEST_URL,
  dropQueue: (url, queue) => deleteQueueStreams(url, [queue]),
  readDeadLetters,
  privateBroker: async () => {
    const server = await PrivateNats.start();
    return {
      url: server.url,
      restart: () => server.restart(),
      killAndStart: async () => {
        await server.kill();
        await server.start();
      },
      stop: () => server.dispose(),
    };
  },
};

/** Why the suite cannot run here (the shared server, or a private one, cannot be had), or null. */
export async function natsConformanceUnavailable(): Promise<string | null> {
  return (await natsUnavailable()) ?? (await privateNatsUnavailable());
}
