import { connect } from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string[]>;
  body: string;
  json(): unknown;
  header(name: string): string | undefined;
}

/**
 * One HTTP/1.1 request over a plain socket, with full control of the header lines (repeated headers, odd casing,
 * oversized values) and of the request target (`target`, as written on the request line: an absolute-form URI, say)
 * that fetch would normalise away.
 */
export function rawRequest(
  url: string,
  o: { method?: string; target?: string; headers?: [string, string][]; body?: string } = {},
): Promise<RawResponse> {
  const u = new URL(url);
  const lines = [
    `${o.method ?? 'GET'} ${o.target ?? `${u.pathname}${u.search}`} HTTP/1.1`,
    `Host: ${u.host}`,
    'Connection: close',
  ];
  for (const [k, v] of o.headers ?? []) lines.push(`${k}: ${v}`);
  if (o.body !== undefined) lines.push(`Content-Length: ${Buffer.byteLength(o.body)}`);
  return sendRaw(url, `${lines.join('\r\n')}\r\n\r\n${o.body ?? ''}`);
}

/** Writes `payload` as it is (request line, headers, body) to the host and port of `url`; resolves when it closes. */
export function sendRaw(url: string, payload: string): Promise<RawResponse> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(u.port), u.hostname);
    const chunks: Buffer[] = [];
    socket.on('data', (c) => chunks.push(c));
    socket.on('error', reject);
    socket.on('end', () => {
      const text = Buffer.concat(chunks).toString();
      const [head = '', ...rest] = text.split('\r\n\r\n');
      const [statusLine = '', ...headerLines] = head.split('\r\n');
      const headers: Record<string, string[]> = {};
      for (const line of headerLines) {
        const i = line.indexOf(':');
        const k = line.slice(0, i).toLowerCase();
        headers[k] = [...(headers[k] ?? []), line.slice(i + 1).trim()];
      }
      let body = rest.join('\r\n\r\n');
      if (headers['transfer-encoding']?.[0] === 'chunked') body = dechunk(body);
      resolve({
        status: Number(statusLine.split(' ')[1]),
        headers,
        body,
        json: () => JSON.parse(body),
        header: (name) => headers[name.toLowerCase()]?.[0],
      });
    });
    socket.write(payload);
  });
}

function dechunk(s: string): string {
  let out = '';
  let rest = s;
  for (;;) {
    const i = rest.indexOf('\r\n');
    const size = Number.parseInt(rest.slice(0, i), 16);
    if (!size) return out;
    out += rest.slice(i + 2, i + 2 + size);
    rest = rest.slice(i + 4 + size);
  }
}
