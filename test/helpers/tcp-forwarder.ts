import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy in front of a real dependency (PostgreSQL, Redis) that a test can make misbehave the way a network or
 * a hung server does, without touching the machine's shared server:
 * - `stall()`: stop forwarding in both directions while every socket stays open (a hung server, a black-holed
 *   route); new connections are accepted and then held the same way. What clients send meanwhile is read and kept,
 *   as a hung server's kernel would accept it, so that a test can see what was sent to a dependency that never
 *   answered (`sentWhileStalled`);
 * - `resume()`: forward again, what was held included;
 * - `closeAll()`: cut every open connection (a server restart); new ones are still accepted;
 * - `blackholeOpen()`: the connections open now go silent for good while new ones work (a failover that leaves the
 *   old sockets dead without a reset: the client only learns it from a timeout);
 * - `retarget()`: new connections go to another server while the open ones stay where they are (a failover behind
 *   one address: DNS, a managed service's endpoint).
 */
const DEFAULT_PORTS: Record<string, number> = { 'postgres:': 5432, 'postgresql:': 5432, 'redis:': 6379 };

export class TcpForwarder {
  private readonly pairs = new Set<[Socket, Socket]>();
  /** Black-holed connections: silent until `close()` ends them. */
  private readonly dead = new Set<Socket>();
  private stalled = false;
  /** Every byte clients sent during the last stall, in arrival order per connection. */
  private readonly stalledBytes: Buffer[] = [];
  /** What each connection sent while stalled, forwarded on `resume`. */
  private readonly held = new Map<Socket, Buffer[]>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
    private target: { host: string; port: number },
  ) {}

  /** Listens on a free loopback port and forwards every connection to `target`. */
  static async start(target: { host: string; port: number }): Promise<TcpForwarder> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const forwarder = new TcpForwarder(server, (server.address() as { port: number }).port, target);
    server.on('connection', (client) => forwarder.accept(client, forwarder.target));
    return forwarder;
  }

  /**
   * A forwarder in front of the server a `postgres://` or `redis://` URL names (its default port when the URL has
   * none), and that URL pointed at the forwarder instead.
   */
  static async before(url: string): Promise<{ forwarder: TcpForwarder; url: string }> {
    const target = new URL(url);
    const port = Number(target.port || DEFAULT_PORTS[target.protocol]);
    if (!port) throw new Error(`TcpForwarder.before: no port for ${target.protocol}`);
    const forwarder = await TcpForwarder.start({ host: target.hostname, port });
    return { forwarder, url: forwarder.urlFor(url) };
  }

  /** `url` with its host and port replaced by this forwarder's. */
  urlFor(url: string): string {
    const u = new URL(url);
    u.hostname = '127.0.0.1';
    u.port = String(this.port);
    return u.toString();
  }

  stall(): void {
    this.stalled = true;
    this.stalledBytes.length = 0;
    for (const [, upstream] of this.pairs) upstream.pause();
  }

  /** What clients sent during the last stall (all connections), as latin1 text, e.g. to count commands in it. */
  sentWhileStalled(): string {
    return Buffer.concat(this.stalledBytes).toString('latin1');
  }

  resume(): void {
    this.stalled = false;
    for (const [client, upstream] of this.pairs) {
      for (const chunk of this.held.get(client) ?? []) upstream.write(chunk);
      this.held.delete(client);
      client.resume();
      upstream.resume();
    }
  }

  blackholeOpen(): void {
    for (const [client, upstream] of this.pairs) {
      client.pause();
      upstream.pause();
      client.removeAllListeners('data');
      upstream.removeAllListeners('data');
      this.dead.add(client).add(upstream);
    }
    this.pairs.clear();
  }

  closeAll(): void {
    for (const [client, upstream] of this.pairs) {
      client.destroy();
      upstream.destroy();
    }
    this.pairs.clear();
  }

  /** Sends new connections to `target`; open ones keep theirs. */
  retarget(target: { host: string; port: number }): void {
    this.target = target;
  }

  async close(): Promise<void> {
    this.closeAll();
    for (const socket of this.dead) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket, target: { host: string; port: number }): void {
    const upstream = connect(target.port, target.host);
    const pair: [Socket, Socket] = [client, upstream];
    this.pairs.add(pair);
    // Client to upstream: while stalled, read and kept (see the class comment); upstream to client: paused.
    client.on('data', (chunk: Buffer) => {
      if (this.stalled) {
        this.stalledBytes.push(chunk);
        let held = this.held.get(client);
        if (!held) this.held.set(client, (held = []));
        held.push(chunk);
      } else if (!upstream.write(chunk)) client.pause();
    });
    upstream.on('drain', () => client.resume());
    forward(upstream, client, () => this.stalled);
    if (this.stalled) upstream.pause();
    const end = () => {
      client.destroy();
      upstream.destroy();
      this.pairs.delete(pair);
      this.held.delete(client);
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  }
}

/** Copies `from` to `to` with backpressure; while stalled `from` stays paused, so its writes back up in TCP. */
function forward(from: Socket, to: Socket, stalled: () => boolean): void {
  from.on('data', (chunk) => {
    if (!to.write(chunk)) from.pause();
  });
  to.on('drain', () => {
    if (!stalled()) from.resume();
  });
}
