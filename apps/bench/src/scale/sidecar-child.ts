/**
 * A worker host's fault injector, run inside that host's namespace: a TcpProxy on the host's own 127.0.0.1 in
 * front of the database host, so the host's workers reach the database through it and the harness can slow
 * (delay), cut (drop) or silence (freeze) that host's traffic alone. Commands arrive over the IPC channel,
 * each answered once applied; the process ends when the channel closes (the harness went away).
 */
import { TcpProxy, type ProxyAddress } from '@statusq/conformance';

export type SidecarCommand = { op: 'delay'; ms: number } | { op: 'drop' } | { op: 'freeze' } | { op: 'thaw' };
export type SidecarReply = { ready: true; port: number } | { done: SidecarCommand['op']; dropped?: number } | { error: string };

async function main(config: { upstream: ProxyAddress }): Promise<void> {
  const proxy = await TcpProxy.start(config.upstream);
  const reply = (message: SidecarReply) => process.send?.(message);
  process.on('message', (command: SidecarCommand) => {
    try {
      if (command.op === 'delay') proxy.delay(command.ms / 2);
      else if (command.op === 'drop') return reply({ done: 'drop', dropped: proxy.dropAll() });
      else if (command.op === 'freeze') proxy.freeze();
      else if (command.op === 'thaw') proxy.thaw();
      else throw new Error(`unknown sidecar command ${JSON.stringify(command)}`);
      reply({ done: command.op });
    } catch (error) {
      reply({ error: error instanceof Error ? error.message : String(error) });
    }
  });
  process.once('disconnect', () => void proxy.close().then(() => process.exit(0)));
  reply({ ready: true, port: proxy.port });
}

void main(JSON.parse(process.argv[2] ?? '{}') as { upstream: ProxyAddress }).catch((error: unknown) => {
  process.send?.({ error: error instanceof Error ? error.message : String(error) });
  process.exit(1);
});
