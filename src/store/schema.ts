/**
 * The tables, one interface each. Portable across SQLite and PostgreSQL:
 * times are epoch milliseconds (bigint), flags are 0/1 integers, JSON is text.
 */
export interface Database {
  users: UsersTable;
  sessions: SessionsTable;
  signing_keys: SigningKeysTable;
  oauth_clients: OAuthClientsTable;
}

export interface UsersTable {
  id: string;
  username: string;
  image_url: string | null;
  password_hash: string;
  /** The account's pinned API version (SPEC §9.3); null = baseline. */
  api_version: string | null;
  created_at: number;
}

export interface SessionsTable {
  id: string;
  user_id: string;
  created_at: number;
  expires_at: number;
  revoked_at: number | null;
}

export interface SigningKeysTable {
  kid: string;
  alg: string;
  public_jwk: string;
  private_jwk: string;
  created_at: number;
  retired_at: number | null;
}

export interface OAuthClientsTable {
  client_id: string;
  kind: 'preregistered' | 'dcr' | 'cimd' | 'internal';
  metadata: string;
  /** The client's pinned API version (SPEC §9.3); null = the user's pin, then the baseline. */
  api_version: string | null;
  created_at: number;
  last_used_at: number | null;
}
