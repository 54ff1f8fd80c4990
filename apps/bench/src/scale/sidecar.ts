/** The harness's handle on a worker host's fault injector (sidecar-child.ts), which runs in that host's namespace. */
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { ProxyAddress } from '@statusq/conformance';
import type { SidecarCommand, SidecarReply } from './sidecar-child.js';
import type { Topology } from './topology.js';

const CHILD = fileURLToPath(new URL('./sidecar-child.js', import.meta.url));
/** A command is a few socket calls in a process on this machine; longer means the sidecar is gone. */
const ANSWER_TIMEOUT_MS = 10_000;

export class Sidecar {
  private constructor(
    private readonly child: ChildProcess,
    /** Where the host's workers connect instead of the database host: the sidecar on the host's own loopback. */
    readonly local: ProxyAddress,
  ) {}

  static async start(topology: Topology, host: string, upstream: ProxyAddress): Promise<Sidecar> {
    const child = topology.spawn(host, process.execPath, [CHILD, JSON.stringify({ upstream })], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    try {
      const first = await answer(child);
      if (!('ready' in first)) throw new Error(`the sidecar on ${host} did not start: ${JSON.stringify(first)}`);
      return new Sidecar(child, { host: '127.0.0.1', port: first.port });
    } catch (error) {
      child.kill('SIGKILL');
      throw error;
    }
  }

  /** Adds `ms` to every round trip between this host and the database (half each way). */
  delay(ms: number): Promise<void> {
    return this.send({ op: 'delay', ms }).then(() => undefined);
  }

  /** Cuts every connection this host has to the database; returns how many. */
  async drop(): Promise<number> {
    const reply = await this.send({ op: 'drop' });
    return 'dropped' in reply ? (reply.dropped ?? 0) : 0;
  }

  stop(): void {
    if (this.child.connected) this.child.disconnect();
    this.child.kill('SIGKILL');
  }

  private async send(command: SidecarCommand): Promise<SidecarReply> {
    const reply = answer(this.child);
    this.child.send(command);
    const got = await reply;
    if ('error' in got) throw new Error(`sidecar: ${got.error}`);
    return got;
  }
}

function answer(child: ChildProcess): Promise<SidecarReply> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => finish(new Error('the sidecar did not answer within 10 s')), ANSWER_TIMEOUT_MS);
    const onMessage = (message: SidecarReply) => finish(null, message);
    const onExit = (code: number | null) => finish(new Error(`the sidecar exited (code ${code})`));
    function finish(error: Error | null, message?: SidecarReply) {
      clearTimeout(timer);
      child.off('message', onMessage);
      child.off('exit', onExit);
      if (error) reject(error);
      else resolve(message!);
    }
    child.once('message', onMessage);
    child.once('exit', onExit);
  });
}
