// The floor of a durable refresh rotation on the service's stack: the least a token endpoint built on node:http,
// better-sqlite3 and node:crypto must do to rotate a refresh token and answer only once the rotation is on disk.
// node:http reads a form POST; one SQLite transaction (WAL, `synchronous = FULL`, the service's durability; SQLite's
// own checkpoints) consumes the presented token by compare-and-set and stores its successor; one access token is
// signed with FLOOR_ALG; the JSON answer is written. No client, grant, connection, scope or reuse rule, no log, no
// metrics: what is left is the HTTP exchange, the synced commit and the signature. A side's CPU per rotation divided
// by this one's is what its own rules and framework cost; the in-memory peer's divided by this one's is the most a
// rotation synced before its answer can be cheaper than that peer on this stack (another stack, or a design writing
// less than a row and an index entry per rotation, could go lower by what it saves outside the sync). Sequential
// only: alone, each rotation pays its own sync (with many chains a server can share one sync among a turn's
// rotations, which this does not). It prints its URL and FLOOR_CHAINS refresh tokens.
import Database from 'better-sqlite3';
import { createHash, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const alg = process.env.FLOOR_ALG ?? 'ES256';
const { privateKey } =
  alg === 'ES256'
    ? generateKeyPairSync('ec', { namedCurve: 'P-256' })
    : generateKeyPairSync('rsa', { modulusLength: 2048 });
const signOptions = alg === 'ES256' ? { key: privateKey, dsaEncoding: 'ieee-p1363' } : privateKey;

const dir = mkdtempSync(join(tmpdir(), 'floor-'));
const db = new Database(join(dir, 'floor.sqlite'));
db.pragma('journal_mode = WAL');
db.pragma('synchronous = FULL');
db.exec(`CREATE TABLE refresh_tokens (
  id INTEGER PRIMARY KEY,
  token_hash BLOB NOT NULL UNIQUE,
  family TEXT NOT NULL,
  consumed_at INTEGER,
  expires_at INTEGER NOT NULL
)`);
const consume = db.prepare(
  'UPDATE refresh_tokens SET consumed_at = ? WHERE token_hash = ? AND consumed_at IS NULL AND expires_at > ? RETURNING family',
);
const store = db.prepare('INSERT INTO refresh_tokens (token_hash, family, expires_at) VALUES (?, ?, ?)');
const DAY_MS = 24 * 3600 * 1000;

const hashOf = (token) => createHash('sha256').update(token).digest();
const newToken = () => randomBytes(32).toString('base64url');

/** Consumes `presented` and stores its successor in one synced commit; undefined when it was not live. */
const rotate = db.transaction((presented, successor, now) => {
  const row = consume.get(now, hashOf(presented), now);
  if (!row) return undefined;
  store.run(hashOf(successor), row.family, now + 30 * DAY_MS);
  return successor;
});

const b64 = (value) => Buffer.from(JSON.stringify(value)).toString('base64url');
const HEADER = b64({ alg, typ: 'at+jwt', kid: 'floor' });

function accessToken(now) {
  const iat = Math.floor(now / 1000);
  const claims = {
    iss: 'http://127.0.0.1/',
    sub: 'usr_floor',
    aud: 'http://127.0.0.1:4102/mcp',
    client_id: 'floor-client',
    scope: 'agency:mcp:read',
    iat,
    exp: iat + 3600,
    jti: newToken(),
  };
  const input = `${HEADER}.${b64(claims)}`;
  return `${input}.${sign('sha256', Buffer.from(input), signOptions).toString('base64url')}`;
}

function answer(res, status, body) {
  const json = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'cache-control': 'no-store',
    'content-length': Buffer.byteLength(json),
  });
  res.end(json);
}

const server = createServer((req, res) => {
  let form = '';
  req.setEncoding('utf8');
  req.on('data', (chunk) => (form += chunk));
  req.on('end', () => {
    const presented = new URLSearchParams(form).get('refresh_token');
    const now = Date.now();
    const successor = presented && rotate(presented, newToken(), now);
    if (!successor) return answer(res, 400, { error: 'invalid_grant' });
    answer(res, 200, {
      access_token: accessToken(now),
      token_type: 'Bearer',
      expires_in: 3600,
      refresh_token: successor,
      scope: 'agency:mcp:read',
    });
  });
});

const tokens = [];
for (let i = 0; i < Number(process.env.FLOOR_CHAINS ?? 1); i++) {
  const token = newToken();
  store.run(hashOf(token), `fam_${i}`, Date.now() + 30 * DAY_MS);
  tokens.push(token);
}
server.listen(0, '127.0.0.1', () =>
  console.log(`floor http://127.0.0.1:${server.address().port} chains ${JSON.stringify(tokens)}`),
);
process.on('SIGTERM', () =>
  server.close(() => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
    process.exit(0);
  }),
);
