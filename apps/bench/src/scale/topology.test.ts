import { execFileSync, type ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { Topology, topologyUnavailable } from './topology.js';

const unavailable = topologyUnavailable();
// CI runs as root with iproute2 (scripts/services.sh); there the test must run, not skip.
const mustRun = Boolean(process.env.STATUSQ_REQUIRE_DATABASES);

/** Runs `script` with node on a host and resolves with what it printed, once it printed a line. */
function onHost(topology: Topology, host: string, script: string): { child: ChildProcess; firstLine: Promise<string> } {
  const child = topology.spawn(host, process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const firstLine = new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('\n')) resolve(out.split('\n')[0]!);
    });
    child.once('exit', (code) => reject(new Error(`exited (${code}) before printing: ${out}`)));
  });
  return { child, firstLine };
}

/** A client on `from` that tries to read the server's greeting, giving up after `timeoutMs` (then prints "silent"). */
function tryConnect(topology: Topology, from: string, address: string, timeoutMs: number): Promise<string> {
  return onHost(topology, from, `
    const s = require('net').connect(7000, '${address}');
    const t = setTimeout(() => { console.log('silent'); process.exit(0); }, ${timeoutMs});
    s.on('data', (d) => { console.log(String(d).trim()); process.exit(0); });
    s.on('error', (e) => { console.log('error ' + e.code); process.exit(0); });`).firstLine;
}

describe.skipIf(unavailable !== null && !mustRun)('Topology (hosts as network namespaces)', () => {
  let topology: Topology | null = null;
  afterEach(() => topology?.destroy());

  it('links hosts to each other, partitions one silently and heals it, and leaves nothing behind', async () => {
    topology = Topology.create(['a', 'b']);
    const server = onHost(topology, 'b', `require('net').createServer((s) => s.end('hello from b\\n')).listen(7000, '${topology.address('b')}', () => console.log('listening'))`);
    expect(await server.firstLine).toBe('listening');
    expect(await tryConnect(topology, 'a', topology.address('b'), 5000)).toBe('hello from b');

    topology.partition('b');
    // An absence: packets to a partitioned host vanish, so the client hears nothing (no refusal, no reset).
    expect(await tryConnect(topology, 'a', topology.address('b'), 500)).toBe('silent');
    topology.heal('b');
    expect(await tryConnect(topology, 'a', topology.address('b'), 5000)).toBe('hello from b');

    const netns = topology.netns('b');
    expect(topology.pids('b').length).toBeGreaterThan(0);
    topology.destroy();
    expect(execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' })).not.toContain(netns);
    expect(execFileSync('ip', ['-o', 'link', 'show'], { encoding: 'utf8' })).not.toMatch(new RegExp(`sqs${process.pid}(h\\d|br)`));
  });

  it('refuses bad host names', () => {
    expect(() => Topology.create(['Bad-Name'])).toThrow(/host name "Bad-Name"/);
    expect(() => Topology.create(['a', 'a'])).toThrow(/repeat/);
  });
});
