/**
 * A TCP proxy of a test's own, on 127.0.0.1 (or an address of a network namespace the test made), in front of
 * a real database server, that can play a slow network or one which stops answering without closing anything:
 * `delay(ms)` holds every chunk that long in each direction, `freeze()` stops forwarding in both directions
 * while every socket stays open (clients still connect, at the TCP level, and hear nothing), `thaw()` forwards
 * again what was held back, `dropAll()` cuts every connection, `close()` ends it all. The shared database
 * servers are never touched: only this process's sockets are. Test traffic is small, so held bytes are kept
 * in memory rather than left to TCP flow control.
 */
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

export interface ProxyAddress {
  host: string;
  port: number;
}

/** Bytes on their way, and when they may be passed on (now, unless the proxy adds latency). */
interface Held {
  chunk: Buffer;
  due: number;
}

interface Link {
  client: Socket;
  /** Null until the link is forwarded: a client that connects while frozen reaches nothing upstream. */
  server: Socket | null;
  /** Bytes held back (frozen, or not due yet), per direction, in order. */
  toServer: Held[];
  toClient: Held[];
  /** Set while bytes wait to come due. */
  timer: NodeJS.Timeout | null;
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
  private delayMs = 0;

  private constructor(
    private readonly listener: Server,
    readonly upstream: ProxyAddress,
    readonly host: string,
  ) {
    listener.on('connection', (client: Socket) => this.accept(client));
  }

  /** Listens on `listen` (default: a free port of 127.0.0.1) and forwards each connection to `upstream`. */
  static async start(upstream: ProxyAddress, listen: ProxyAddress = { host: '127.0.0.1', port: 0 }): Promise<TcpProxy> {
    // Half-open allowed: a client's FIN is not answered by the proxy's own, which a frozen network would not send either.
    const listener = createServer({ allowHalfOpen: true });
    const proxy = new TcpProxy(listener, upstream, listen.host);
    await new Promise<void>((resolve, reject) => {
      listener.once('error', reject);
      listener.listen(listen.port, listen.host, () => {
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

  /**
   * Holds each chunk `ms` milliseconds before passing it on, in each direction, so a request and its answer
   * gain twice that (0: none). Order is kept; chunks already held keep their time.
   */
  delay(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`delay must be a non-negative number of milliseconds, got ${ms}`);
    this.delayMs = ms;
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
    const link: Link = { client, server: null, toServer: [], toClient: [], timer: null, clientEnded: false, clientClosed: false, serverClosed: false };
    this.links.add(link);
    client.setNoDelay(true);
    client.on('error', () => undefined);
    client.on('data', (chunk: Buffer) => {
      this.hold(link.toServer, chunk);
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
    // No Nagle on either leg: a proxy that holds small writes for the peer's delayed ACK adds 40 ms stalls
    // (a wire protocol may write several small messages per query).
    const server = connect({ port: this.upstream.port, host: this.upstream.host, noDelay: true });
    link.server = server;
    server.on('error', () => undefined);
    server.on('data', (chunk: Buffer) => {
      this.hold(link.toClient, chunk);
      this.flush(link);
    });
    server.once('close', () => {
      link.serverClosed = true;
      // What the server said before it closed still reaches the client, after its delay.
      if (!this.frozenNow && link.toClient.length === 0) this.cut(link);
      else this.flush(link);
    });
    this.flush(link);
  }

  private hold(queue: Held[], chunk: Buffer): void {
    const last = queue[queue.length - 1];
    queue.push({ chunk, due: Math.max(performance.now() + this.delayMs, last?.due ?? 0) });
  }

  /** Passes on what each side holds for the other and is due, the client's FIN last, unless frozen. */
  private flush(link: Link): void {
    if (this.frozenNow || !this.links.has(link)) return;
    const now = performance.now();
    if (link.server !== null) {
      passDue(link.toServer, link.server, now);
      if (link.clientEnded && link.toServer.length === 0) link.server.end();
    }
    passDue(link.toClient, link.client, now);
    if (link.serverClosed && link.toClient.length === 0) return this.cut(link);
    const next = Math.min(link.server === null ? Infinity : (link.toServer[0]?.due ?? Infinity), link.toClient[0]?.due ?? Infinity);
    if (next !== Infinity && link.timer === null) {
      link.timer = setTimeout(() => {
        link.timer = null;
        this.flush(link);
      }, Math.max(1, Math.ceil(next - now)));
    }
  }

  private cut(link: Link): void {
    if (!this.links.delete(link)) return;
    if (link.timer !== null) clearTimeout(link.timer);
    link.client.destroy();
    link.server?.destroy();
  }
}

function passDue(queue: Held[], to: Socket, now: number): void {
  while (queue.length > 0 && queue[0]!.due <= now) to.write(queue.shift()!.chunk);
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
