import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { delay, waitFor, withDeadline } from './harness.js';
import { TcpProxy, routeThrough } from './tcp-proxy.js';

/** An upstream that echoes every byte back and remembers what it received and who connected. */
async function echoServer(): Promise<{ server: Server; port: number; received: () => string; sockets: Socket[] }> {
  let received = '';
  const sockets: Socket[] = [];
  const server = createServer((socket) => {
    sockets.push(socket);
    socket.on('error', () => undefined);
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString();
      socket.write(chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return { server, port: typeof address === 'object' && address !== null ? address.port : 0, received: () => received, sockets };
}

/** A client of the proxy that collects what it hears. */
async function client(port: number): Promise<{ socket: Socket; heard: () => string; closed: Promise<void> }> {
  const socket = connect(port, '127.0.0.1');
  let heard = '';
  socket.on('data', (chunk: Buffer) => (heard += chunk.toString()));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  await withDeadline(new Promise<void>((resolve) => socket.once('connect', () => resolve())), 5000, 'the client to connect to the proxy');
  return { socket, heard: () => heard, closed };
}

/**
 * How long the freeze assertions watch for bytes that must not pass. On loopback an unfrozen byte crosses in
 * well under a millisecond, so a leak shows up within this window; it only ever waits for an absence.
 */
const QUIET_MS = 150;

describe('TcpProxy', () => {
  const cleanups: Array<() => unknown> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function setUp() {
    const upstream = await echoServer();
    cleanups.push(() => new Promise<void>((resolve) => upstream.server.close(() => resolve())));
    cleanups.push(() => upstream.sockets.forEach((s) => s.destroy()));
    const proxy = await TcpProxy.start({ host: '127.0.0.1', port: upstream.port });
    cleanups.push(() => proxy.close());
    return { upstream, proxy };
  }

  it('forwards both ways; frozen, it holds every byte while the sockets stay open; thawed, it delivers them', async () => {
    const { upstream, proxy } = await setUp();
    const c = await client(proxy.port);
    c.socket.write('one');
    await waitFor('the echo of "one"', () => c.heard() === 'one', { timeoutMs: 5000 });

    proxy.freeze();
    c.socket.write('two');
    await delay(QUIET_MS);
    expect(upstream.received()).toBe('one');
    expect(c.heard()).toBe('one');
    expect(c.socket.destroyed).toBe(false);
    expect(proxy.connections).toBe(1);

    proxy.thaw();
    await waitFor('the held bytes to arrive after the thaw', () => c.heard() === 'onetwo', { timeoutMs: 5000 });
    expect(upstream.received()).toBe('onetwo');
  });

  it('accepts a client while frozen without reaching upstream, and connects it on thaw', async () => {
    const { upstream, proxy } = await setUp();
    proxy.freeze();
    const c = await client(proxy.port);
    c.socket.write('hello');
    await delay(QUIET_MS);
    expect(upstream.sockets).toHaveLength(0);
    expect(c.heard()).toBe('');
    proxy.thaw();
    await waitFor('the echo after the thaw', () => c.heard() === 'hello', { timeoutMs: 5000 });
    expect(upstream.sockets).toHaveLength(1);
  });

  it('sees a client close while frozen (openClients) without passing the close upstream until the thaw', async () => {
    const { upstream, proxy } = await setUp();
    const c = await client(proxy.port);
    c.socket.write('x');
    await waitFor('the echo', () => c.heard() === 'x', { timeoutMs: 5000 });
    proxy.freeze();
    c.socket.destroy();
    await waitFor('the proxy to see its client gone', () => proxy.openClients === 0, { timeoutMs: 5000 });
    await delay(QUIET_MS);
    expect(upstream.sockets[0]!.destroyed).toBe(false);
    proxy.thaw();
    await waitFor('the upstream socket to close after the thaw', () => upstream.sockets[0]!.destroyed, { timeoutMs: 5000 });
    expect(proxy.connections).toBe(0);
  });

  it('dropAll() cuts both sides of every connection; close() stops accepting', async () => {
    const { upstream, proxy } = await setUp();
    const c = await client(proxy.port);
    c.socket.write('x');
    await waitFor('the echo', () => c.heard() === 'x', { timeoutMs: 5000 });
    expect(proxy.dropAll()).toBe(1);
    await withDeadline(c.closed, 5000, 'the client socket to close');
    await waitFor('the upstream socket to close', () => upstream.sockets[0]!.destroyed || upstream.sockets[0]!.readableEnded, { timeoutMs: 5000 });
    expect(proxy.connections).toBe(0);

    await proxy.close();
    const refused = await new Promise<string>((resolve) => {
      const s = connect(proxy.port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve('connected');
      });
      s.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
    });
    expect(refused).toBe('ECONNREFUSED');
  });

  it('delay(ms) holds each chunk that long in each direction, in order, and passes what the server said before closing', async () => {
    const { upstream, proxy } = await setUp();
    proxy.delay(60);
    const c = await client(proxy.port);
    const sent = performance.now();
    for (const part of ['a', 'b', 'c']) c.socket.write(part);
    await waitFor('the delayed echo', () => c.heard() === 'abc', { timeoutMs: 5000 });
    // A lower bound only: the proxy must not pass a byte before its time, in either direction.
    expect(performance.now() - sent).toBeGreaterThanOrEqual(119);
    expect(upstream.received()).toBe('abc');

    upstream.sockets[0]!.end('bye');
    await withDeadline(c.closed, 5000, 'the client socket to close after the delayed goodbye');
    expect(c.heard()).toBe('abcbye');
    expect(() => proxy.delay(-1)).toThrow(RangeError);
  });

  it('routeThrough rewrites a database URL to the proxy, keeping credentials, database and parameters', () => {
    const route = routeThrough('db://u:p%40ss@db.example:6543/app?application_name=x', 5432, { queryTimeout: '1000' });
    expect(route.upstream).toEqual({ host: 'db.example', port: 6543 });
    expect(route.via({ host: '127.0.0.1', port: 40000 })).toBe('db://u:p%40ss@127.0.0.1:40000/app?application_name=x&queryTimeout=1000');
    expect(routeThrough('db://root@127.0.0.1/test', 3306).upstream).toEqual({ host: '127.0.0.1', port: 3306 });
  });
});
