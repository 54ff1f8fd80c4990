/**
 * A TCP proxy of a test's own, on 127.0.0.1, in front of a real database server, that can play a network
 * which stops answering without closing anything: `freeze()` stops forwarding in both directions while every
 * socket stays open (clients still connect, at the TCP level, and hear nothing), `thaw()` forwards again what
 * was held back, `dropAll()` cuts every connection, `close()` ends it all. The shared database servers are
 * never touched: only this process's sockets are. Test traffic is small, so held bytes are kept in memory
 * rather than left to TCP flow control.
 */
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

export interface ProxyAddress {
  host: string;
  port: number;
}

interface Link {
  client: Socket;
  /** Null until the link is forwarded: a client that connects while frozen reaches nothing upstream. */
  server: Socket | null;
  /** Bytes held back while frozen, per direction, in order. */
  toServer: Buffer[];
  toClient: Buffer[];
  /** The client sent its FIN (it ended, or closed, its side). */
  clientEnded: boolean;
  clientClosed: boolean;
  serverClosed: boolean;
}

export class TcpProxy {
  private readonly links = new Set<Link>();
  private frozenNow = false;
  private acceptedCount = 0;
  private boundPort = 0;

  private constructor(
    private readonly listener: Server,
    readonly upstream: ProxyAddress,
  ) {
    listener.on('connection', (client: Socket) => this.accept(client));
  }

  /** Listens on a free port of 127.0.0.1 and forwards each connection to `upstream`. */
  static async start(upstream: ProxyAddress): Promise<TcpProxy> {
    // Half-open allowed: a client's FIN is not answered by the proxy's own, which a frozen network would not send either.
    const listener = createServer({ allowHalfOpen: true });
    const proxy = new TcpProxy(listener, upstream);
    await new Promise<void>((resolve, reject) => {
      listener.once('error', reject);
      listener.listen(0, '127.0.0.1', () => {
        listener.off('error', reject);
        resolve();
      });
    });
    proxy.boundPort = (listener.address() as AddressInfo).port;
    return proxy;
  }

  /** The port it listens on (and listened on, once closed). */
  get port(): number {
    return this.boundPort;
  }

  readonly host = '127.0.0.1';

  get frozen(): boolean {
    return this.frozenNow;
  }

  /** Connections accepted since start. */
  get accepted(): number {
    return this.acceptedCount;
  }

  /** Connections the proxy still holds (both sides, or what is left of them while frozen). */
  get connections(): number {
    return this.links.size;
  }

  /**
   * Clients that have not ended their side (sent a FIN). The proxy keeps reading from its clients while frozen
   * (it only holds their bytes back), so it sees that even then.
   */
  get openClients(): number {
    let open = 0;
    for (const link of this.links) if (!link.clientEnded && !link.clientClosed) open++;
    return open;
  }

  /**
   * Stops forwarding in both directions: bytes are held back, closes are not passed on, every socket stays
   * open, and a new client is accepted but not connected upstream.
   */
  freeze(): void {
    this.frozenNow = true;
  }

  /** Forwards again, what was held back first; what ended or closed meanwhile is ended or closed on the other side now. */
  thaw(): void {
    this.frozenNow = false;
    for (const link of [...this.links]) {
      if (link.clientClosed || link.serverClosed) this.cut(link);
      else if (link.server === null) this.forward(link);
      else this.flush(link);
    }
  }

  /** Destroys every connection, both sides; returns how many there were. */
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
    const link: Link = { client, server: null, toServer: [], toClient: [], clientEnded: false, clientClosed: false, serverClosed: false };
    this.links.add(link);
    client.on('error', () => undefined);
    client.on('data', (chunk: Buffer) => {
      link.toServer.push(chunk);
      this.flush(link);
    });
    client.once('end', () => {
      link.clientEnded = true;
      this.flush(link);
    });
    client.once('close', () => {
      link.clientClosed = true;
      if (!this.frozenNow) this.cut(link);
    });
    if (!this.frozenNow) this.forward(link);
  }

  private forward(link: Link): void {
    const server = connect(this.upstream.port, this.upstream.host);
    link.server = server;
    server.on('error', () => undefined);
    server.on('data', (chunk: Buffer) => {
      link.toClient.push(chunk);
      this.flush(link);
    });
    server.once('close', () => {
      link.serverClosed = true;
      if (!this.frozenNow) this.cut(link);
    });
    this.flush(link);
  }

  /** Passes on what each side holds for the other, the client's FIN last, unless frozen. */
  private flush(link: Link): void {
    if (this.frozenNow) return;
    if (link.server !== null) {
      for (const chunk of link.toServer.splice(0)) link.server.write(chunk);
      if (link.clientEnded) link.server.end();
    }
    for (const chunk of link.toClient.splice(0)) link.client.write(chunk);
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
