import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';

/**
 * A name server on 127.0.0.1 (UDP, a port of its own) for the tests' resolutions: it answers A queries for the names
 * it is given (AAAA with no address), and every other query with NXDOMAIN — or, `silent`, never answers at all, as a
 * name server that an attacker runs, or that is down, does. It records every question it was asked.
 */
export interface TestNameServer {
  /** `127.0.0.1:<port>`, for CIMD_TEST_DNS_SERVERS. */
  address: string;
  /** The names asked, in order, with their type (`A`, `AAAA`, or the type's number). */
  asked: { name: string; type: string }[];
  close(): Promise<void>;
}

export async function startNameServer(o: {
  a?: Record<string, string>;
  silent?: boolean;
}): Promise<TestNameServer> {
  const socket = createSocket('udp4');
  const asked: TestNameServer['asked'] = [];
  socket.on('message', (query, peer) => {
    const question = parseQuestion(query);
    if (!question) return;
    asked.push({ name: question.name, type: TYPES[question.type] ?? String(question.type) });
    if (!o.silent) reply(socket, peer, query, question, o.a ?? {});
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${socket.address().port}`,
    asked,
    close: () => new Promise((resolve) => socket.close(() => resolve())),
  };
}

const TYPES: Record<number, string> = { 1: 'A', 28: 'AAAA' };

interface Question {
  name: string;
  type: number;
  /** Where the question ends (RFC 1035 §4.1.2: the name, its type and class). */
  end: number;
}

function parseQuestion(query: Buffer): Question | undefined {
  if (query.length < 12 || query.readUInt16BE(4) !== 1) return undefined;
  const labels: string[] = [];
  let at = 12;
  while (at < query.length && query[at] !== 0) {
    const length = query[at]!;
    labels.push(query.subarray(at + 1, at + 1 + length).toString('ascii'));
    at += 1 + length;
  }
  if (at + 5 > query.length) return undefined;
  return { name: labels.join('.').toLowerCase(), type: query.readUInt16BE(at + 1), end: at + 5 };
}

/** RFC 1035 §4.1: the query's id and question, with one A record when the name is known and A was asked. */
function reply(
  socket: Socket,
  peer: RemoteInfo,
  query: Buffer,
  q: Question,
  a: Record<string, string>,
): void {
  const address = a[q.name];
  const answer = address !== undefined && q.type === 1;
  const header = Buffer.alloc(12);
  query.copy(header, 0, 0, 2);
  header.writeUInt16BE(address === undefined ? 0x8183 : 0x8180, 2); // a response, recursion; NXDOMAIN or NOERROR
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(answer ? 1 : 0, 6);
  const parts = [header, query.subarray(12, q.end)];
  if (answer) {
    const record = Buffer.alloc(16);
    record.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question's
    record.writeUInt16BE(1, 2); // A
    record.writeUInt16BE(1, 4); // IN
    record.writeUInt32BE(60, 6); // TTL
    record.writeUInt16BE(4, 10);
    address.split('.').forEach((octet, i) => record.writeUInt8(Number(octet), 12 + i));
    parts.push(record);
  }
  socket.send(Buffer.concat(parts), peer.port, peer.address);
}
