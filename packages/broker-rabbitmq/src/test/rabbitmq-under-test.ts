/** RabbitMQ as the broker conformance suite drives it: the shared server, and private nodes it restarts and kills. */
import { fileURLToPath } from 'node:url';
import type { BrokerUnderTest } from '@statusq/conformance';
import { PrivateRabbitMQ, RABBITMQ_TEST_URL, readDeadLetters, deleteQueues } from '../testing.js';

export const rabbitmqUnderTest: BrokerUnderTest = {
  name: 'rabbitmq',
  brokerModule: fileURLToPath(new URL('../../dist/index.js', import.meta.url)),
  url: RABBITMQ_TEST_URL,
  dropQueue: (url, queue) => deleteQueues([queue], url),
  readDeadLetters,
  privateBroker: async () => {
    const node = await PrivateRabbitMQ.start();
    return {
      url: node.url,
      restart: () => node.restart(),
      killAndStart: async () => {
        await node.kill();
        await node.start();
      },
      stop: () => node.dispose(),
    };
  },
};
