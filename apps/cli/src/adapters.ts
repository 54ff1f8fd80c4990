import { connect, type Store } from '@statusq/core';
import type { ConnectOptions } from '@statusq/core/tools';

/** Names the adapter module explicitly; inherited by the worker processes of `work --processes`. */
export const ADAPTER_VARIABLE = 'STATUSQ_ADAPTER';

/** Opens `url` with core's `connect`; `adapter` (from `--adapter` or STATUSQ_ADAPTER) names an adapter other than the scheme's. */
export async function openStore(url: string, options: ConnectOptions, adapter: string | undefined): Promise<Store> {
  return connect(url, { ...options, adapter });
}
