import { Agent, createServer, request as httpRequest, type Server } from 'node:http';

/**
 * A load balancer for tests: each request goes to the next upstream in turn (round robin), with its method, path,
 * headers (Host included, as a proxy that keeps the public host does) and body; the answer comes back as it is.
 * An upstream that cannot be reached is answered 502, as a real balancer would.
 */
export class RoundRobinProxy {
  upstreams: number[] = [];
  private next = 0;
  private readonly agent = new Agent({ keepAlive: true });

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  /** Listens on a free loopback port; `upstreams` (loopback ports) may be set later, once they are known. */
  static async start(): Promise<RoundRobinProxy> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const proxy = new RoundRobinProxy(
      server,
      `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    );
    server.on('request', (req, res) => {
      const port = proxy.upstreams[proxy.next++ % proxy.upstreams.length];
      const upstream = httpRequest(
        {
          host: '127.0.0.1',
          port,
          method: req.method,
          path: req.url,
          headers: req.headers,
          agent: proxy.agent,
        },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.rawHeaders);
          answer.pipe(res);
        },
      );
      upstream.on('error', () => {
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
        res.end('bad gateway');
      });
      req.pipe(upstream);
    });
    return proxy;
  }

  async close(): Promise<void> {
    this.agent.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
