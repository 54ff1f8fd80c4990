/**
 * The Galera cluster a galera.ts run writes to: three nodes formed one joiner at a time, the faults the runs
 * inject (a node killed, a node isolated), and the waits that tell when the cluster has settled after each.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { waitFor } from '@statusq/conformance';
import type { PrivateServer } from '@statusq/conformance';
import { serverTreeCpuSeconds } from '../cpu.js';
import type { BalancerTarget } from './balancer.js';
import { GaleraNode, accountUrl, createAccount, viaSocket } from './db-host.js';
import type { RunDatabase } from './run-kit.js';
import type { Topology } from './topology.js';

export const NODES = ['db1', 'db2', 'db3'] as const;
export type NodeName = (typeof NODES)[number];
/** Forming the cluster (two state transfers) or a node's rejoin; seconds on an idle machine. */
const CLUSTER_TIMEOUT_MS = 90_000;
/** After the workers exit, every node must have applied the last write set before the table is read. */
const CATCH_UP_TIMEOUT_MS = 30_000;

/** The three nodes as one RunDatabase: db1's address for the harness, CPU summed over the nodes' lives. */
export class GaleraCluster implements RunDatabase {
  readonly dialect = 'mysql' as const;
  /** CPU seconds and conflict counts of node lives that ended (a killed node starts again from zero). */
  private retired = { cpuSeconds: 0, conflicts: 0 };

  version = '';

  private constructor(
    private readonly topology: Topology,
    private readonly nodes: Map<NodeName, GaleraNode>,
  ) {}

  static async start(topology: Topology): Promise<GaleraCluster> {
    const peers = NODES.map((n) => topology.address(n));
    const nodes = new Map<NodeName, GaleraNode>();
    const cluster = new GaleraCluster(topology, nodes);
    try {
      nodes.set('db1', await GaleraNode.start(topology, 'db1', { peers, bootstrap: true }));
      // Made before the others join, so their state transfer brings it.
      cluster.version = `MariaDB Galera ${(await createAccount(nodes.get('db1')!.server)).replace(/^MariaDB /, '')}`;
      // One joiner at a time: a donor serves one full copy at a time, and a second joiner's start would wait on it.
      for (const name of NODES.slice(1)) {
        nodes.set(name, await GaleraNode.start(topology, name, { peers, bootstrap: false }));
        await cluster.synced(name, nodes.size);
      }
      for (const name of NODES) await cluster.synced(name);
      return cluster;
    } catch (error) {
      await cluster.stop();
      throw error;
    }
  }

  get address(): { host: string; port: number } {
    return this.target('db1');
  }

  get adminUrl(): string {
    return accountUrl(this.address.host, this.address.port);
  }

  target(name: NodeName): BalancerTarget & { port: number } {
    return { name, host: this.topology.address(name), port: this.node(name).port };
  }

  cpuSeconds(): number {
    let sum = this.retired.cpuSeconds;
    for (const { server } of this.nodes.values()) sum += server.pid === null ? 0 : (serverTreeCpuSeconds(server.pid) ?? 0);
    return sum;
  }

  /** Certification failures and brute-force aborts so far, over every node (and every node life). */
  async conflicts(): Promise<number> {
    let sum = this.retired.conflicts;
    for (const name of this.nodes.keys()) sum += await this.nodeConflicts(name);
    return sum;
  }

  /** Waits until every node has applied the same last write set (nothing still queued anywhere). */
  async caughtUp(): Promise<void> {
    await waitFor(
      'every Galera node to apply the last write set',
      async () => {
        const states = await Promise.all(NODES.map((n) => this.status(n)));
        const committed = new Set(states.map((s) => s.wsrep_last_committed));
        return committed.size === 1 && states.every((s) => s.wsrep_local_recv_queue === '0');
      },
      { timeoutMs: CATCH_UP_TIMEOUT_MS, intervalMs: 50 },
    );
  }

  /** SIGKILLs a node (everything on its host), as a power cut would; its counts so far are kept. */
  async kill(name: NodeName): Promise<void> {
    const server = this.node(name);
    this.retired.conflicts += await this.nodeConflicts(name);
    this.retired.cpuSeconds += server.pid === null ? 0 : (serverTreeCpuSeconds(server.pid) ?? 0);
    this.topology.killAll(name);
  }

  /** Connections the node has accepted since it started (its Connections status). */
  async connections(name: NodeName): Promise<number> {
    return viaSocket(this.node(name), async (c) => {
      const [rows] = await c.query("SHOW GLOBAL STATUS LIKE 'Connections'");
      return Number((rows as Array<{ Value: string }>)[0]?.Value ?? 0);
    });
  }

  /** Cuts a node off from the others (its group connections closed and refused), or lets it back. */
  async isolate(name: NodeName, on: boolean): Promise<void> {
    await viaSocket(this.node(name), (c) => c.query(`SET GLOBAL wsrep_provider_options = 'gmcast.isolate=${on ? 1 : 0}'`));
  }

  /** Waits until every other node's view has dropped `name` (their cluster size is one less). */
  async evicted(name: NodeName): Promise<void> {
    const others = NODES.filter((n) => n !== name);
    await waitFor(
      `the other Galera nodes to evict ${name}`,
      async () => (await Promise.all(others.map((n) => this.status(n)))).every((s) => s.wsrep_cluster_size === String(others.length) && s.wsrep_ready === 'ON'),
      { timeoutMs: CLUSTER_TIMEOUT_MS, intervalMs: 100 },
    );
  }

  /**
   * Starts a killed node again on its data directory, as Debian's service does (its position recovered
   * first, so it catches up by IST), and waits until it has rejoined and is synced.
   */
  async rejoin(name: NodeName): Promise<void> {
    const node = this.nodes.get(name)!;
    const server = this.node(name);
    await node.recover();
    await server.restart(0).catch((error: Error) => {
      throw new Error(`${error.message}; its log ends:\n${logTail(server)}`, { cause: error });
    });
    await this.synced(name);
  }

  async stop(): Promise<void> {
    // Joiners first: the last node to leave is the one a restart would bootstrap from.
    for (const { server } of [...this.nodes.values()].reverse()) await server.stop().catch(() => undefined);
  }

  private node(name: NodeName): PrivateServer {
    const node = this.nodes.get(name);
    if (!node) throw new Error(`no Galera node ${name}`);
    return node.server;
  }

  private async status(name: NodeName): Promise<Record<string, string>> {
    return viaSocket(this.node(name), async (c) => {
      const [rows] = await c.query("SHOW GLOBAL STATUS LIKE 'wsrep%'");
      return Object.fromEntries((rows as Array<{ Variable_name: string; Value: string }>).map((r) => [r.Variable_name.toLowerCase(), r.Value]));
    });
  }

  private async nodeConflicts(name: NodeName): Promise<number> {
    const s = await this.status(name);
    return Number(s.wsrep_local_cert_failures ?? 0) + Number(s.wsrep_local_bf_aborts ?? 0);
  }

  /** Waits (bounded) until a node is ready, synced, and sees a cluster of `size` nodes. */
  async synced(name: NodeName, size: number = NODES.length): Promise<void> {
    let last = 'no answer';
    try {
      await waitFor(
        `Galera node ${name} to be synced in a cluster of ${size}`,
        async () => {
          const s = await this.status(name).catch((error: Error) => ({ error: error.message }) as Record<string, string>);
          last = s.error ?? `ready ${s.wsrep_ready}, ${s.wsrep_local_state_comment}, cluster size ${s.wsrep_cluster_size}`;
          return s.wsrep_ready === 'ON' && s.wsrep_local_state_comment === 'Synced' && s.wsrep_cluster_size === String(size);
        },
        { timeoutMs: CLUSTER_TIMEOUT_MS, intervalMs: 100 },
      );
    } catch (error) {
      throw new Error(`${(error as Error).message}; last: ${last}; its log ends:\n${logTail(this.node(name))}`, { cause: error });
    }
  }
}

function logTail(server: PrivateServer): string {
  try {
    return readFileSync(join(server.dir, 'server.log'), 'utf8').split('\n').slice(-25).join('\n');
  } catch {
    return '(no log)';
  }
}
