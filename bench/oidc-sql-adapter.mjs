// A storage adapter for oidc-provider over SQLite (better-sqlite3, the same pragmas as the service) or PostgreSQL
// (pg), so that the peer in bench/refresh.mjs writes every rotation to a database as this service does. Written
// for the bench from the adapter interface oidc-provider documents (upsert, find, findByUid, findByUserCode,
// consume, destroy, revokeByGrantId); one table, the payload as JSON text.
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';

const TABLE = `CREATE TABLE IF NOT EXISTS oidc_models (
  model text NOT NULL, id text NOT NULL, payload text NOT NULL, grant_id text, uid text, user_code text,
  expires_at bigint, consumed_at bigint, PRIMARY KEY (model, id))`;
const GRANT_INDEX = 'CREATE INDEX IF NOT EXISTS oidc_models_grant ON oidc_models (grant_id)';

/** The SQL dialect: `$n` placeholders run as-is on PostgreSQL and are rewritten to `?` for SQLite. */
async function openSql(store) {
  if (store.kind === 'postgres') {
    const pool = new pg.Pool({ connectionString: store.url, max: 10 });
    await pool.query(TABLE);
    await pool.query(GRANT_INDEX);
    return { query: async (text, values) => (await pool.query(text, values)).rows };
  }
  const db = new SQLite(join(store.dir, 'oidc.sqlite'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec(TABLE);
  db.exec(GRANT_INDEX);
  const statements = new Map();
  return {
    query: async (text, values) => {
      let st = statements.get(text);
      if (!st) {
        st = db.prepare(text.replace(/\$\d+/g, '?'));
        statements.set(text, st);
      }
      return st.reader ? st.all(values) : (st.run(values), []);
    },
  };
}

export async function sqlAdapter(store) {
  const sql = await openSql(store);
  const now = () => Math.floor(Date.now() / 1000);
  const live = (row) => {
    if (!row || (row.expires_at !== null && Number(row.expires_at) <= now())) return undefined;
    const payload = JSON.parse(row.payload);
    return row.consumed_at === null ? payload : { ...payload, consumed: Number(row.consumed_at) };
  };
  return class SqlAdapter {
    constructor(model) {
      this.model = model;
    }
    async upsert(id, payload, expiresIn) {
      await sql.query(
        `INSERT INTO oidc_models (model, id, payload, grant_id, uid, user_code, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (model, id) DO UPDATE SET payload = excluded.payload, expires_at = excluded.expires_at`,
        [
          this.model,
          id,
          JSON.stringify(payload),
          payload.grantId ?? null,
          payload.uid ?? null,
          payload.userCode ?? null,
          expiresIn ? now() + expiresIn : null,
        ],
      );
    }
    async find(id) {
      const [row] = await sql.query('SELECT * FROM oidc_models WHERE model = $1 AND id = $2', [
        this.model,
        id,
      ]);
      return live(row);
    }
    async findByUid(uid) {
      const [row] = await sql.query('SELECT * FROM oidc_models WHERE model = $1 AND uid = $2', [
        this.model,
        uid,
      ]);
      return live(row);
    }
    async findByUserCode(code) {
      const q = 'SELECT * FROM oidc_models WHERE model = $1 AND user_code = $2';
      return live((await sql.query(q, [this.model, code]))[0]);
    }
    async consume(id) {
      const q = 'UPDATE oidc_models SET consumed_at = $1 WHERE model = $2 AND id = $3';
      await sql.query(q, [now(), this.model, id]);
    }
    async destroy(id) {
      await sql.query('DELETE FROM oidc_models WHERE model = $1 AND id = $2', [this.model, id]);
    }
    async revokeByGrantId(grantId) {
      await sql.query('DELETE FROM oidc_models WHERE grant_id = $1', [grantId]);
    }
  };
}
