/**
 * Hosts of a run's own on this machine: one network namespace per host (`ip netns`), each with a veth link to
 * a bridge, addresses in a private /24 the run picks, loopback up. The harness (in the machine's own namespace)
 * holds the bridge's address, so it reaches every host and every host reaches the others; nothing else is
 * routed anywhere. A partition takes a host's link off the bridge: its packets are dropped silently, as by a
 * failed switch port (connections hang rather than fail, which is the hard case), and healing puts it back.
 *
 * Everything a topology makes is named `sqs<pid>...` after the process that made it, so a run that died
 * without tearing down (SIGKILL, a power cut of the test machine) is cleaned up by the next one, which
 * removes what belongs to processes no longer alive; what live runs made is left alone.
 */
import { execFile, execFileSync, spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { existsSync } from 'node:fs';

const PREFIX = 'sqs';
/** Longest any one `ip` command may take: they are local kernel calls that answer in milliseconds. */
const IP_TIMEOUT_MS = 10_000;

function ip(...args: string[]): string {
  return execFileSync('ip', args, { encoding: 'utf8', timeout: IP_TIMEOUT_MS, stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Why hosts cannot be made here (not root, no iproute2), or null when they can. */
export function topologyUnavailable(): string | null {
  if (process.platform !== 'linux') return 'network namespaces need Linux';
  if (process.getuid?.() !== 0) return 'network namespaces need root (ip netns add)';
  try {
    ip('netns', 'list');
  } catch (error) {
    return `ip netns does not work here (${(error as Error).message.split('\n')[0]}); install iproute2`;
  }
  return null;
}

export interface HostSpec {
  /** Short name: letters and digits, up to 6 characters (it becomes part of interface names of at most 15). */
  name: string;
}

export class Topology {
  private readonly hosts = new Map<string, { netns: string; address: string; port: string }>();
  private destroyed = false;
  private readonly onExit = () => this.destroySync();

  private constructor(
    private readonly tag: string,
    private readonly bridge: string,
    readonly subnet: string,
  ) {}

  /** Makes the bridge and one namespace per host. Anything left from dead runs is removed first. */
  static create(hostNames: readonly string[]): Topology {
    const unavailable = topologyUnavailable();
    if (unavailable) throw new Error(`cannot make test hosts: ${unavailable}`);
    for (const name of hostNames) if (!/^[a-z][a-z0-9]{0,5}$/.test(name)) throw new Error(`host name ${JSON.stringify(name)}: use 1-6 lowercase letters and digits`);
    if (new Set(hostNames).size !== hostNames.length) throw new Error(`host names repeat: ${hostNames.join(', ')}`);
    if (hostNames.length > 200) throw new Error('at most 200 hosts');
    removeStale();
    const tag = `${PREFIX}${process.pid}`;
    const topology = new Topology(tag, `${tag}br`, freeSubnet());
    process.on('exit', topology.onExit);
    try {
      ip('link', 'add', topology.bridge, 'type', 'bridge');
      ip('addr', 'add', `${topology.subnet}.254/24`, 'dev', topology.bridge);
      ip('link', 'set', topology.bridge, 'up');
      hostNames.forEach((name, i) => topology.addHost(name, i + 1));
    } catch (error) {
      topology.destroySync();
      throw error;
    }
    return topology;
  }

  private addHost(name: string, index: number): void {
    const netns = `${this.tag}-${name}`;
    const port = `${this.tag}h${index}`;
    const address = `${this.subnet}.${index}`;
    ip('netns', 'add', netns);
    this.hosts.set(name, { netns, address, port });
    ip('link', 'add', port, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', netns);
    ip('link', 'set', port, 'master', this.bridge, 'up');
    ip('-n', netns, 'addr', 'add', `${address}/24`, 'dev', 'eth0');
    ip('-n', netns, 'link', 'set', 'eth0', 'up');
    ip('-n', netns, 'link', 'set', 'lo', 'up');
  }

  private host(name: string) {
    const host = this.hosts.get(name);
    if (!host) throw new Error(`no host ${JSON.stringify(name)} in this topology (${[...this.hosts.keys()].join(', ')})`);
    return host;
  }

  address(name: string): string {
    return this.host(name).address;
  }

  netns(name: string): string {
    return this.host(name).netns;
  }

  /** Starts a program on a host (it runs in that host's namespace, as root, with this machine's files). */
  spawn(name: string, file: string, args: readonly string[], options: SpawnOptions = {}): ChildProcess {
    return spawn('ip', ['netns', 'exec', this.host(name).netns, file, ...args], options);
  }

  /** Process ids running on a host now. */
  pids(name: string): number[] {
    return parsePids(ip('netns', 'pids', this.host(name).netns));
  }

  /** pids() without blocking the event loop (listing a namespace's processes scans /proc: slow on a busy machine). */
  listPids(name: string): Promise<number[]> {
    const netns = this.host(name).netns;
    return new Promise((resolve, reject) => {
      execFile('ip', ['netns', 'pids', netns], { encoding: 'utf8', timeout: IP_TIMEOUT_MS }, (error, stdout) => (error ? reject(error) : resolve(parsePids(stdout))));
    });
  }

  /** SIGKILLs everything on a host, as a power cut would; returns how many processes there were. */
  killAll(name: string): number {
    return killPids(this.pids(name));
  }

  /** Cuts a host off: its link leaves the bridge, so every packet to and from it is dropped without a word. */
  partition(name: string): void {
    ip('link', 'set', this.host(name).port, 'nomaster');
  }

  heal(name: string): void {
    ip('link', 'set', this.host(name).port, 'master', this.bridge);
  }

  /**
   * Gives a host a second address on its link, in the topology's subnet (a floating service address, as
   * keepalived or a cloud's floating IP places it); removeAddress takes it away again.
   */
  addAddress(name: string, address: string): void {
    ip('-n', this.host(name).netns, 'addr', 'add', `${address}/24`, 'dev', 'eth0');
  }

  removeAddress(name: string, address: string): void {
    ip('-n', this.host(name).netns, 'addr', 'del', `${address}/24`, 'dev', 'eth0');
  }

  /**
   * Announces that `address` now lives on this host: unsolicited (gratuitous) ARP from its link, as keepalived
   * does after a move, so every neighbour that cached the old owner's link address updates it (iputils-arping).
   * Resolves once the announcements are sent.
   */
  announceAddress(name: string, address: string, count = 2): Promise<void> {
    return new Promise((resolve, reject) => {
      execFile('ip', ['netns', 'exec', this.host(name).netns, 'arping', '-q', '-U', '-c', String(count), '-I', 'eth0', address], { timeout: IP_TIMEOUT_MS + count * 1000 }, (error, _stdout, stderr) =>
        error ? reject(new Error(`arping on ${name} failed (${String(stderr).trim() || error.message}); install iputils-arping (scripts/services.sh does)`)) : resolve(),
      );
    });
  }

  /** Kills every process on every host, then removes the namespaces, links and bridge. Safe to call again. */
  destroy(): void {
    this.destroySync();
  }

  private destroySync(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    process.off('exit', this.onExit);
    for (const name of this.hosts.keys()) {
      try {
        this.killAll(name);
      } catch {
        // The namespace may not have been made.
      }
    }
    removeOwned(this.tag);
  }
}

function parsePids(listing: string): number[] {
  return listing
    .split('\n')
    .filter((line) => /^\d+$/.test(line.trim()))
    .map(Number);
}

/** SIGKILLs each process (those already gone are skipped); returns how many were asked to die. */
export function killPids(pids: readonly number[]): number {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone already.
    }
  }
  return pids.length;
}

/** Removes the namespaces and links of one run (its tag), ignoring what is already gone. */
function removeOwned(tag: string): void {
  for (const netns of listNamespaces()) if (netns.startsWith(`${tag}-`)) tryIp('netns', 'del', netns);
  for (const link of listLinks()) if (link === `${tag}br` || new RegExp(`^${tag}h\\d+$`).test(link)) tryIp('link', 'del', link);
}

/** Removes what runs whose process is gone left behind. */
function removeStale(): void {
  const tags = new Set<string>();
  for (const name of [...listNamespaces(), ...listLinks()]) {
    const m = new RegExp(`^(${PREFIX}(\\d+))(-|h\\d+$|br$)`).exec(name);
    if (m && !existsSync(`/proc/${m[2]}`)) tags.add(m[1]!);
  }
  for (const tag of tags) {
    for (const netns of listNamespaces()) {
      if (!netns.startsWith(`${tag}-`)) continue;
      for (const pid of tryIp('netns', 'pids', netns).split('\n').filter((l) => /^\d+$/.test(l.trim()))) {
        try {
          process.kill(Number(pid), 'SIGKILL');
        } catch {
          // Gone already.
        }
      }
    }
    removeOwned(tag);
  }
}

function tryIp(...args: string[]): string {
  try {
    return ip(...args);
  } catch {
    return '';
  }
}

function listNamespaces(): string[] {
  return tryIp('netns', 'list')
    .split('\n')
    .map((line) => line.trim().split(' ')[0]!)
    .filter(Boolean);
}

function listLinks(): string[] {
  return tryIp('-o', 'link', 'show')
    .split('\n')
    .map((line) => /^\d+:\s+([^:@\s]+)/.exec(line)?.[1])
    .filter((name): name is string => name !== undefined);
}

/** A 10.213.x.0/24 no interface of this machine uses yet (x from 1 to 250). */
function freeSubnet(): string {
  const routes = tryIp('-4', 'route', 'show');
  const addresses = tryIp('-4', '-o', 'addr', 'show');
  for (let attempt = 0; attempt < 250; attempt++) {
    const x = 1 + ((process.pid + attempt) % 250);
    const subnet = `10.213.${x}`;
    if (!routes.includes(`${subnet}.`) && !addresses.includes(`${subnet}.`)) return subnet;
  }
  throw new Error('no free 10.213.x.0/24 subnet for test hosts');
}
