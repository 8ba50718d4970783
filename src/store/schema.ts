/**
 * The tables, one interface each. Portable across SQLite and PostgreSQL:
 * times are epoch milliseconds (bigint), flags are 0/1 integers, JSON is text.
 */
export interface Database {
  users: UsersTable;
  sessions: SessionsTable;
  signing_keys: SigningKeysTable;
  oauth_clients: OAuthClientsTable;
  agencies: AgenciesTable;
  members: MembersTable;
  clients: ClientsTable;
  projects: ProjectsTable;
  tasks: TasksTable;
  notes: NotesTable;
  connections: ConnectionsTable;
  authorization_codes: AuthorizationCodesTable;
  refresh_tokens: RefreshTokensTable;
  audit_events: AuditEventsTable;
}

export interface UsersTable {
  id: string;
  username: string;
  image_url: string | null;
  password_hash: string;
  /** The account's pinned API version (docs/contract.md#versioning); null = baseline. */
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
  /** The client's pinned API version (docs/contract.md#versioning); null = the user's pin, then the baseline. */
  api_version: string | null;
  created_at: number;
  last_used_at: number | null;
  /** CIMD only: the stored document is used without refetching until then (0002). */
  metadata_expires_at?: number | null;
}

export interface AgenciesTable {
  id: string;
  name: string;
  plan: string;
  /** "The account allows write" (docs/contract.md#connections): 0/1. */
  agent_write_enabled: number;
  created_at: number;
}

export interface MembersTable {
  id: string;
  agency_id: string;
  user_id: string;
  role: 'owner' | 'admin' | 'manager' | 'member' | 'viewer';
  status: 'active' | 'removed';
  created_at: number;
  removed_at: number | null;
}

export interface ClientsTable {
  id: string;
  agency_id: string;
  name: string;
  email: string | null;
  status: string;
  created_at: number;
  updated_at: number;
}

export interface ProjectsTable {
  id: string;
  agency_id: string;
  client_id: string;
  name: string;
  status: string;
  due_on: string | null;
  created_at: number;
  updated_at: number;
}

export interface TasksTable {
  id: string;
  agency_id: string;
  project_id: string;
  title: string;
  status: string;
  assignee_member_id: string | null;
  due_on: string | null;
  created_at: number;
  updated_at: number;
}

export interface NotesTable {
  id: string;
  agency_id: string;
  subject_type: string;
  subject_id: string;
  author_member_id: string;
  body: string;
  created_at: number;
}

/**
 * THE grant (docs/contract.md#connections). `pending` from consent until its code is exchanged; `active` until revoked or expired.
 * `agency_id` / `member_id` are null for the user resources (user:read).
 */
export interface ConnectionsTable {
  id: string;
  user_id: string;
  agency_id: string | null;
  member_id: string | null;
  client_id: string;
  resource: string;
  /** Space-separated granted scopes (canonical names). */
  scopes: string;
  /** Space-separated permissions the member let the agent use. */
  ceiling: string;
  status: 'pending' | 'active' | 'revoked';
  created_at: number;
  last_used_at: number | null;
  /** Sliding: now + 30 days at each refresh. */
  expires_at: number;
  revoked_at: number | null;
  revoke_reason: string | null;
}

export interface AuthorizationCodesTable {
  /** SHA-256 of the code; the code itself is never stored. */
  hash: string;
  connection_id: string;
  client_id: string;
  user_id: string;
  redirect_uri: string;
  code_challenge: string;
  resource: string;
  scope: string;
  created_at: number;
  expires_at: number;
  consumed_at: number | null;
}

export interface RefreshTokensTable {
  /** SHA-256 of the token. */
  hash: string;
  connection_id: string;
  parent_hash: string | null;
  /** Random salt; the successor is HMAC(token, salt), so a grace-window replay can be answered with the same one. */
  successor_salt: string;
  scope: string;
  issued_at: number;
  rotated_at: number | null;
  expires_at: number;
  /** SHA-256 of the family tag every token of the family carries (0005); null for tokens issued before families. */
  family: string | null;
}

export interface AuditEventsTable {
  id: string;
  type: string;
  agency_id: string | null;
  actor_user_id: string | null;
  member_id: string | null;
  connection_id: string | null;
  /** JSON object. */
  detail: string;
  created_at: number;
}
