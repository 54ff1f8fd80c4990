/**
 * A TCP load balancer on a worker host (Debian's haproxy), the standard way clients of a Galera cluster find
 * a live node without knowing the cluster: the host's workers connect to it, it forwards each new connection
 * to its preferred node while that node answers, else to the first backup that does. Health is a TCP connect
 * every CHECK_INTERVAL_MS: a killed node refuses at once and is out after two failed checks, and its open
 * sessions are cut then (on-marked-down), so pooled connections fail fast instead of waiting on a dead peer.
 */
import { type ChildProcess } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { waitFor } from '@statusq/conformance';
import mysql from 'mysql2/promise';
import type { Topology } from './topology.js';

const HAPROXY = '/usr/sbin/haproxy';
/** Where the balancer listens on its host (its own address, so the harness can probe it over the bridge). */
export const BALANCER_PORT = 3306;
const CHECK_INTERVAL_MS = 300;
const START_TIMEOUT_MS = 10_000;
const STOP_TIMEOUT_MS = 5_000;

export interface BalancerTarget {
  name: string;
  host: string;
  port: number;
}

export class Balancer {
  private readonly exited: Promise<void>;

  private constructor(
    private readonly child: ChildProcess,
    /** Where the host's workers connect. */
    readonly local: { host: string; port: number },
    private output: { text: string },
  ) {
    this.exited = new Promise((resolve) => {
      child.once('exit', () => resolve());
      child.once('error', () => resolve());
    });
  }

  /**
   * Starts haproxy on `host`, sending every connection to `preferred` while its check passes, else to the
   * first of `backups` whose does; resolves once `probe`'s login through it works.
   */
  static async start(topology: Topology, host: string, preferred: BalancerTarget, backups: readonly BalancerTarget[], dir: string, probe: { user: string; password: string }): Promise<Balancer> {
    if (!existsSync(HAPROXY)) throw new Error(`no ${HAPROXY}; install Debian's haproxy package (scripts/services.sh does)`);
    const local = { host: topology.address(host), port: BALANCER_PORT };
    const config = join(dir, `haproxy-${host}.cfg`);
    const server = (t: BalancerTarget, backup: boolean) => `  server ${t.name} ${t.host}:${t.port} check${backup ? ' backup' : ''}`;
    writeFileSync(
      config,
      [
        'global',
        '  maxconn 4000',
        'defaults',
        '  mode tcp',
        '  timeout connect 1s',
        // A connection the chosen node refuses (killed, not yet marked down) goes to another node instead.
        '  retries 2',
        '  option redispatch',
        // Pooled connections sit idle between claims; the server's own timeouts govern them, not the balancer.
        '  timeout client 1h',
        '  timeout server 1h',
        'listen mariadb',
        `  bind ${local.host}:${local.port}`,
        `  default-server inter ${CHECK_INTERVAL_MS}ms fall 2 rise 2 on-marked-down shutdown-sessions`,
        server(preferred, false),
        ...backups.map((b) => server(b, true)),
        '',
      ].join('\n'),
    );
    const output = { text: '' };
    // -db: in the foreground, so the process is haproxy's own and stops with a signal.
    const child = topology.spawn(host, HAPROXY, ['-db', '-f', config], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout?.on('data', (chunk: Buffer) => (output.text += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (output.text += chunk.toString()));
    const balancer = new Balancer(child, local, output);
    try {
      let gone = false;
      void balancer.exited.then(() => (gone = true));
      await waitFor(
        `haproxy on ${host} to forward logins to ${preferred.name}`,
        async () => {
          if (gone) throw new Error(`haproxy on ${host} exited: ${output.text.slice(-1000)}`);
          return loginWorks(local, probe);
        },
        { timeoutMs: START_TIMEOUT_MS, intervalMs: 50 },
      );
      return balancer;
    } catch (error) {
      await balancer.stop();
      throw error;
    }
  }

  async stop(): Promise<void> {
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), STOP_TIMEOUT_MS);
    await this.exited;
    clearTimeout(timer);
  }

  /** haproxy's own lines (servers marked down and up), for a failed run's report. */
  log(): string {
    return this.output.text;
  }
}

async function loginWorks(at: { host: string; port: number }, account: { user: string; password: string }): Promise<boolean> {
  try {
    const conn = await mysql.createConnection({ host: at.host, port: at.port, user: account.user, password: account.password, connectTimeout: 1000 });
    conn.on('error', () => undefined);
    await conn.end().catch(() => conn.destroy());
    return true;
  } catch {
    return false;
  }
}
