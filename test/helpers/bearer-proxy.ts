import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface BearerProxy {
  /** The proxy's endpoint URL: the target's path on the proxy's loopback origin. */
  url: string;
  close(): Promise<void>;
}

/**
 * A loopback HTTP proxy that adds `Authorization: Bearer <token>` to every request and forwards everything else
 * untouched — method, path, the caller's own Host and Origin headers, body and streamed response — so a tool that
 * cannot authenticate (the MCP conformance runner) can exercise a protected MCP endpoint, DNS-rebinding checks
 * included. An Authorization header the caller sent is replaced.
 */
export async function startBearerProxy(target: string, token: string): Promise<BearerProxy> {
  const to = new URL(target);
  const server = createServer((req, res) => forward(to, token, req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${to.pathname}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function forward(to: URL, token: string, req: IncomingMessage, res: ServerResponse): void {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined && name !== 'authorization') headers[name] = value;
  }
  headers['authorization'] = `Bearer ${token}`;
  const upstream = httpRequest(
    { host: to.hostname, port: to.port, method: req.method, path: req.url, headers, setHost: false },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    },
  );
  upstream.on('error', () => {
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: 'upstream unreachable' }));
  });
  res.on('close', () => upstream.destroy());
  req.pipe(upstream);
}
