import { z } from 'zod';
import { type ApplicationType, redirectUriProblem } from '../redirect-uri.js';

/** A client as the authorization endpoint sees it, whatever its kind (DESIGN §3 `oauth_clients.kind`). */
export interface ResolvedClient {
  clientId: string;
  kind: 'preregistered' | 'dcr' | 'cimd';
  name: string | undefined;
  clientUri: string | undefined;
  applicationType: ApplicationType;
  redirectUris: string[];
}

/** Client metadata (RFC 7591 §2) this server honours; unknown fields are ignored, never stored. */
export const ClientMetadataSchema = z.object({
  redirect_uris: z.array(z.string()).min(1).max(10),
  token_endpoint_auth_method: z.string().max(100).optional(),
  grant_types: z.array(z.string().max(100)).max(5).optional(),
  response_types: z.array(z.string().max(100)).max(5).optional(),
  application_type: z.string().max(20).optional(),
  client_name: z.string().max(200).optional(),
  client_uri: z.string().max(2000).optional(),
  logo_uri: z.string().max(2000).optional(),
  scope: z.string().max(1000).optional(),
  contacts: z.array(z.string().max(320)).max(10).optional(),
  tos_uri: z.string().max(2000).optional(),
  policy_uri: z.string().max(2000).optional(),
  software_id: z.string().max(200).optional(),
  software_version: z.string().max(100).optional(),
});

export type ClientMetadata = z.infer<typeof ClientMetadataSchema>;

const GRANT_TYPES = ['authorization_code', 'refresh_token'];

/**
 * Validates client metadata for a public client (RFC 7591 §2, §3.2.2). Returns the normalised metadata or the reason
 * it is refused (→ `invalid_redirect_uri` or `invalid_client_metadata`).
 */
export function checkClientMetadata(
  input: unknown,
  o: { operatorTrusted?: boolean } = {},
):
  | {
      ok: true;
      metadata: ClientMetadata & { application_type: ApplicationType; token_endpoint_auth_method: 'none' };
    }
  | { ok: false; error: 'invalid_redirect_uri' | 'invalid_client_metadata'; description: string } {
  const parsed = ClientMetadataSchema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = issue.path.length ? String(issue.path[0]) : 'body';
    return {
      ok: false,
      error: field === 'redirect_uris' ? 'invalid_redirect_uri' : 'invalid_client_metadata',
      description: field === 'body' ? 'Send a JSON object of client metadata' : `${field}: ${issue.message}`,
    };
  }
  const m = parsed.data;
  // Public clients only (DESIGN §5): RFC 7591 §2's default would be client_secret_basic, which we do not offer.
  const method = m.token_endpoint_auth_method ?? 'none';
  if (method !== 'none') {
    return {
      ok: false,
      error: 'invalid_client_metadata',
      description: `token_endpoint_auth_method ${method} is not supported; only public clients ("none") may register`,
    };
  }
  const applicationType = m.application_type ?? 'web';
  if (applicationType !== 'web' && applicationType !== 'native') {
    return {
      ok: false,
      error: 'invalid_client_metadata',
      description: 'application_type must be web or native',
    };
  }
  for (const g of m.grant_types ?? []) {
    if (!GRANT_TYPES.includes(g)) {
      return { ok: false, error: 'invalid_client_metadata', description: `grant_type ${g} is not supported` };
    }
  }
  for (const r of m.response_types ?? []) {
    if (r !== 'code') {
      return {
        ok: false,
        error: 'invalid_client_metadata',
        description: `response_type ${r} is not supported`,
      };
    }
  }
  for (const uri of m.redirect_uris) {
    const problem = redirectUriProblem(uri, applicationType, o);
    if (problem) return { ok: false, error: 'invalid_redirect_uri', description: problem };
  }
  for (const f of ['client_uri', 'logo_uri', 'tos_uri', 'policy_uri'] as const) {
    const v = m[f];
    if (v !== undefined && !/^https:\/\//.test(v)) {
      return { ok: false, error: 'invalid_client_metadata', description: `${f} must be an https URL` };
    }
  }
  return {
    ok: true,
    metadata: { ...m, application_type: applicationType, token_endpoint_auth_method: 'none' },
  };
}

export function toResolved(
  clientId: string,
  kind: ResolvedClient['kind'],
  m: Pick<ClientMetadata, 'client_name' | 'client_uri' | 'redirect_uris' | 'application_type'>,
): ResolvedClient {
  return {
    clientId,
    kind,
    name: m.client_name,
    clientUri: m.client_uri,
    applicationType: m.application_type === 'native' ? 'native' : 'web',
    redirectUris: m.redirect_uris,
  };
}
