/**
 * A TCP proxy of a test's own, on 127.0.0.1, in front of a real database server, that can play a network
 * which stops answering without closing anything: `freeze()` stops forwarding in both directions while every
 * socket stays open (clients still connect, at the TCP level, and hear nothing), `thaw()` forwards again what
 * was held back, `dropAll()` cuts every connection, `close()` ends it all. The shared database servers are
 * never touched: only this process's sockets are.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export interface ProxyAddress {
  host: string;
  port: number;
}

interface Link {
  client: Socket;
  /** Null until the link is forwarded: a client that connects while frozen reaches nothing upstream. */
  server: Socket | null;
}

export class TcpProxy {
  private readonly links = new Set<Link>();
  private frozenNow = false;
  private acceptedCount = 0;

  private constructor(
    private readonly listener: Server,
    readonly upstream: ProxyAddress,
    readonly port: number,
  ) {}

  /** Listens on a free port of 127.0.0.1 and forwards each connection to `upstream`. */
  static async start(upstream: ProxyAddress): Promise<TcpProxy> {
    let proxy: TcpProxy | undefined;
    // Paused until forwarded, so nothing a client sends while frozen is read before thaw().
    const listener = createServer({ pauseOnConnect: true }, (client) => proxy!.accept(client));
    const port = await new Promise<number>((resolve, reject) => {
      listener.once('error', reject);
      listener.listen(0, '127.0.0.1', () => {
        listener.off('error', reject);
        const address = listener.address();
        resolve(typeof address === 'object' && address !== null ? address.port : 0);
      });
    });
    proxy = new TcpProxy(listener, upstream, port);
    return proxy;
  }

  readonly host = '127.0.0.1';

  get frozen(): boolean {
    return this.frozenNow;
  }

  /** Connections accepted since start. */
  get accepted(): number {
    return this.acceptedCount;
  }

  /** Client connections open now. */
  get connections(): number {
    return this.links.size;
  }

  /** Stops forwarding in both directions; every socket stays open, and new clients are accepted but not forwarded. */
  freeze(): void {
    this.frozenNow = true;
    for (const link of this.links) {
      link.client.pause();
      link.server?.pause();
    }
  }

  /** Forwards again, what was held back first; clients that connected while frozen are connected upstream now. */
  thaw(): void {
    this.frozenNow = false;
    for (const link of this.links) {
      if (link.server === null) this.forward(link);
      else {
        link.client.resume();
        link.server.resume();
      }
    }
  }

  /** Destroys every connection, both sides; returns how many client connections there were. */
  dropAll(): number {
    const count = this.links.size;
    for (const link of [...this.links]) this.cut(link);
    return count;
  }

  /** Stops listening and drops every connection. Safe to call more than once. */
  async close(): Promise<void> {
    this.dropAll();
    if (!this.listener.listening) return;
    await new Promise<void>((resolve) => this.listener.close(() => resolve()));
  }

  private accept(client: Socket): void {
    this.acceptedCount++;
    const link: Link = { client, server: null };
    this.links.add(link);
    client.on('error', () => undefined);
    client.once('close', () => this.cut(link));
    if (!this.frozenNow) this.forward(link);
  }

  private forward(link: Link): void {
    const server = connect(this.upstream.port, this.upstream.host);
    link.server = server;
    server.on('error', () => undefined);
    server.once('close', () => this.cut(link));
    this.pipe(link.client, server);
    this.pipe(server, link.client);
    link.client.resume();
  }

  /** Copies `from` to `to`, holding `from` back while `to` is full or the proxy is frozen. */
  private pipe(from: Socket, to: Socket): void {
    from.on('data', (chunk: Buffer) => {
      if (to.write(chunk)) return;
      from.pause();
      to.once('drain', () => {
        if (!this.frozenNow) from.resume();
      });
    });
    // A clean end on one side is passed on only while the network works.
    from.once('end', () => {
      if (!this.frozenNow) to.end();
    });
  }

  private cut(link: Link): void {
    if (!this.links.delete(link)) return;
    link.client.destroy();
    link.server?.destroy();
  }
}

/**
 * `url` (a `scheme://user:password@host:port/database?...` URL) with its host and port replaced by the
 * proxy's and the given query parameters set, and the address it pointed at (`defaultPort` when it names none).
 */
export function routeThrough(url: string, defaultPort: number, params: Record<string, string> = {}): { upstream: ProxyAddress; via(address: ProxyAddress): string } {
  const parsed = new URL(url);
  const upstream = { host: parsed.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1', port: Number(parsed.port || defaultPort) };
  return {
    upstream,
    via(address) {
      const routed = new URL(url);
      routed.hostname = address.host;
      routed.port = String(address.port);
      for (const [key, value] of Object.entries(params)) routed.searchParams.set(key, value);
      return routed.toString();
    },
  };
}
