import { z } from 'zod';
import type { UserRow } from './users.js';

/**
 * The public objects (docs/contract.md#rest-api) in the latest API version's shape. These zod schemas shape the responses, validate
 * them in tests, and generate the OpenAPI description and the MCP `outputSchema`, so the four cannot drift apart.
 */

export const UserSchema = z
  .object({
    object: z.literal('user').describe('Always `user`.'),
    id: z.string().describe('Unique identifier of the user.'),
    username: z.string().describe("The user's public handle."),
    image_url: z.string().nullable().describe("URL of the user's avatar; null when none is set."),
  })
  .describe('A user account.');

export type User = z.infer<typeof UserSchema>;

export function renderUser(row: Pick<UserRow, 'id' | 'username' | 'image_url'>): User {
  return { object: 'user', id: row.id, username: row.username, image_url: row.image_url };
}
