import type { BrokerError, ConsumeOptions, Delivery, MalformedDelivery } from '@statusq/core/adapter';

/** A consumer's callbacks that record what they get, for tests to wait on. */
export function consumerLog(prefetch = 10) {
  const deliveries: Delivery[] = [];
  const malformed: MalformedDelivery[] = [];
  const errors: BrokerError[] = [];
  const options: ConsumeOptions = {
    prefetch,
    onDelivery: (delivery) => deliveries.push(delivery),
    onMalformed: (delivery) => malformed.push(delivery),
    onError: (error) => errors.push(error),
  };
  return { deliveries, malformed, errors, options };
}
