// A keep-alive HTTP/1.1 client on one raw socket, for load loops whose next request depends on the last answer
// (refresh chains). fetch costs the load generator ~300 µs of CPU per request here, more than the server it
// measures: with 20 chains the bench process saturated its core and its own queueing showed up as the server's
// p99. This client writes the request bytes and parses only the status line, Content-Length or chunked framing.
import { connect } from 'node:net';

const HEADER_END = Buffer.from('\r\n\r\n');

export class KeepAliveClient {
  /** @param {string} origin e.g. http://127.0.0.1:4100 */
  constructor(origin) {
    this.url = new URL(origin);
    this.socket = undefined;
    this.buffer = Buffer.alloc(0);
    this.pending = undefined;
  }

  #connect() {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: this.url.hostname, port: Number(this.url.port), noDelay: true });
      socket.once('connect', () => resolve(socket));
      socket.once('error', reject);
      socket.on('data', (chunk) => this.#onData(chunk));
      socket.on('close', () => {
        // A connection dropped by `reconnect` is no longer this client's: its close says nothing of the current one.
        if (this.socket !== socket) return;
        this.socket = undefined;
        this.pending?.reject(new Error('connection closed before the answer'));
        this.pending = undefined;
      });
    });
  }

  /**
   * Drops the connection, if any; the next request opens a new one. For a run that starts after the server may have
   * sat paused or idle past its keep-alive timeout, when reusing the old connection would race its close.
   */
  reconnect() {
    const socket = this.socket;
    this.socket = undefined;
    this.buffer = Buffer.alloc(0);
    // The old socket's close no longer rejects what was asked on it: a request still waiting would wait forever.
    this.pending?.reject(new Error('connection dropped by reconnect before the answer'));
    this.pending = undefined;
    socket?.destroy();
  }

  /** POSTs `body` (a string) with `contentType`; resolves { status, body } with the body as a string. */
  async post(path, contentType, body) {
    this.socket ??= await this.#connect();
    const head =
      `POST ${path} HTTP/1.1\r\nhost: ${this.url.host}\r\ncontent-type: ${contentType}\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\n\r\n`;
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject };
      this.socket.write(head + body);
    });
  }

  #onData(chunk) {
    this.buffer = this.buffer.length ? Buffer.concat([this.buffer, chunk]) : chunk;
    const end = this.buffer.indexOf(HEADER_END);
    if (end < 0 || !this.pending) return;
    const head = this.buffer.subarray(0, end).toString('latin1');
    const status = Number(head.slice(9, 12));
    const length = /\r\ncontent-length:\s*(\d+)/i.exec(head);
    let body;
    let rest;
    if (length) {
      const stop = end + 4 + Number(length[1]);
      if (this.buffer.length < stop) return;
      body = this.buffer.subarray(end + 4, stop).toString();
      rest = this.buffer.subarray(stop);
    } else if (/\r\ntransfer-encoding:\s*chunked/i.test(head)) {
      const parts = [];
      let at = end + 4;
      for (;;) {
        const lineEnd = this.buffer.indexOf('\r\n', at);
        if (lineEnd < 0) return;
        const size = parseInt(this.buffer.subarray(at, lineEnd).toString('latin1'), 16);
        if (this.buffer.length < lineEnd + 2 + size + 2) return;
        if (size === 0) {
          rest = this.buffer.subarray(lineEnd + 4);
          break;
        }
        parts.push(this.buffer.subarray(lineEnd + 2, lineEnd + 2 + size));
        at = lineEnd + 2 + size + 2;
      }
      body = Buffer.concat(parts).toString();
    } else {
      throw new Error(`answer without a length: ${head}`);
    }
    this.buffer = rest.length ? Buffer.from(rest) : Buffer.alloc(0);
    const { resolve } = this.pending;
    this.pending = undefined;
    resolve({ status, body });
  }
}
