import type { Kysely } from 'kysely';

/**
 * Agencies, their members and data (docs/contract.md#connections), and the authorization server's state: connections (the grant),
 * authorization codes, refresh tokens (hashes only) and the audit trail.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations are frozen in time and must not follow the live schema type
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('agencies')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('plan', 'text', (c) => c.notNull())
    .addColumn('agent_write_enabled', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('members')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('agency_id', 'text', (c) => c.notNull().references('agencies.id').onDelete('cascade'))
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('role', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('removed_at', 'bigint')
    .addUniqueConstraint('members_agency_user', ['agency_id', 'user_id'])
    .execute();
  await db.schema.createIndex('members_user_id').on('members').column('user_id').execute();

  await db.schema
    .createTable('clients')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('agency_id', 'text', (c) => c.notNull().references('agencies.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('email', 'text')
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('clients_agency_id').on('clients').columns(['agency_id', 'id']).execute();

  await db.schema
    .createTable('projects')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('agency_id', 'text', (c) => c.notNull().references('agencies.id').onDelete('cascade'))
    .addColumn('client_id', 'text', (c) => c.notNull().references('clients.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('due_on', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('projects_agency_id').on('projects').columns(['agency_id', 'id']).execute();

  await db.schema
    .createTable('tasks')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('agency_id', 'text', (c) => c.notNull().references('agencies.id').onDelete('cascade'))
    .addColumn('project_id', 'text', (c) => c.notNull().references('projects.id').onDelete('cascade'))
    .addColumn('title', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('assignee_member_id', 'text')
    .addColumn('due_on', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('tasks_agency_id').on('tasks').columns(['agency_id', 'id']).execute();

  await db.schema
    .createTable('notes')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('agency_id', 'text', (c) => c.notNull().references('agencies.id').onDelete('cascade'))
    .addColumn('subject_type', 'text', (c) => c.notNull())
    .addColumn('subject_id', 'text', (c) => c.notNull())
    .addColumn('author_member_id', 'text', (c) => c.notNull())
    .addColumn('body', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('notes_subject').on('notes').columns(['subject_id', 'id']).execute();

  // Resolved Client ID Metadata Documents are kept until this time (HTTP caching clamped, docs/contract.md#the-oauth-flow).
  await db.schema.alterTable('oauth_clients').addColumn('metadata_expires_at', 'bigint').execute();
  await db.schema
    .createIndex('oauth_clients_kind')
    .on('oauth_clients')
    .columns(['kind', 'created_at'])
    .execute();

  await db.schema
    .createTable('connections')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('agency_id', 'text', (c) => c.references('agencies.id').onDelete('cascade'))
    .addColumn('member_id', 'text', (c) => c.references('members.id').onDelete('cascade'))
    .addColumn('client_id', 'text', (c) => c.notNull())
    .addColumn('resource', 'text', (c) => c.notNull())
    .addColumn('scopes', 'text', (c) => c.notNull())
    .addColumn('ceiling', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('last_used_at', 'bigint')
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('revoked_at', 'bigint')
    .addColumn('revoke_reason', 'text')
    .execute();
  await db.schema.createIndex('connections_member_id').on('connections').column('member_id').execute();
  await db.schema.createIndex('connections_user_id').on('connections').column('user_id').execute();

  await db.schema
    .createTable('authorization_codes')
    .addColumn('hash', 'text', (c) => c.primaryKey())
    .addColumn('connection_id', 'text', (c) => c.notNull().references('connections.id').onDelete('cascade'))
    .addColumn('client_id', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('redirect_uri', 'text', (c) => c.notNull())
    .addColumn('code_challenge', 'text', (c) => c.notNull())
    .addColumn('resource', 'text', (c) => c.notNull())
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('consumed_at', 'bigint')
    .execute();

  await db.schema
    .createTable('refresh_tokens')
    .addColumn('hash', 'text', (c) => c.primaryKey())
    .addColumn('connection_id', 'text', (c) => c.notNull().references('connections.id').onDelete('cascade'))
    .addColumn('parent_hash', 'text')
    .addColumn('successor_salt', 'text', (c) => c.notNull())
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('issued_at', 'bigint', (c) => c.notNull())
    .addColumn('rotated_at', 'bigint')
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('refresh_tokens_connection_id')
    .on('refresh_tokens')
    .column('connection_id')
    .execute();

  await db.schema
    .createTable('audit_events')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('agency_id', 'text')
    .addColumn('actor_user_id', 'text')
    .addColumn('member_id', 'text')
    .addColumn('connection_id', 'text')
    .addColumn('detail', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('audit_events_agency')
    .on('audit_events')
    .columns(['agency_id', 'created_at'])
    .execute();
  await db.schema
    .createIndex('audit_events_member')
    .on('audit_events')
    .columns(['member_id', 'created_at'])
    .execute();
}
