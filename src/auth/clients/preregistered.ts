import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { checkClientMetadata, type ResolvedClient, toResolved } from './client.js';

/** The data file shipped with the project (`clients/preregistered.json`), relative to src/ or dist/. */
export const DEFAULT_PREREGISTERED_FILE = fileURLToPath(
  new URL('../../../clients/preregistered.json', import.meta.url),
);

const FileSchema = z.object({
  clients: z.array(z.object({ client_id: z.string().regex(/^[a-z0-9][a-z0-9._-]{1,63}$/) }).passthrough()),
});

/** Reads and validates the pre-registered clients; a bad file stops the start with one clear line. */
export function loadPreregisteredClients(file = DEFAULT_PREREGISTERED_FILE): Map<string, ResolvedClient> {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new Error(`PREREGISTERED_CLIENTS_FILE ${file}: ${(e as Error).message}`);
  }
  const parsed = FileSchema.safeParse(json);
  if (!parsed.success) {
    throw new Error(
      `PREREGISTERED_CLIENTS_FILE ${file}: expected {"clients": [{"client_id", "redirect_uris", ...}]}`,
    );
  }
  const out = new Map<string, ResolvedClient>();
  for (const entry of parsed.data.clients) {
    const { client_id, ...rest } = entry as { client_id: string } & Record<string, unknown>;
    const checked = checkClientMetadata(rest, { operatorTrusted: true });
    if (!checked.ok)
      throw new Error(`PREREGISTERED_CLIENTS_FILE ${file}: client ${client_id}: ${checked.description}`);
    if (out.has(client_id))
      throw new Error(`PREREGISTERED_CLIENTS_FILE ${file}: client ${client_id} is listed twice`);
    out.set(client_id, toResolved(client_id, 'preregistered', checked.metadata));
  }
  return out;
}
