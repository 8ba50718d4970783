import { z } from 'zod';
import { issueText } from '../../base/issue-text.js';
import { ALIASES, SCOPES } from '../../domain/scopes.js';
import { type ApplicationType, redirectUriProblem } from '../redirect-uri.js';

/** A client as the authorization endpoint sees it, whatever its kind (docs/contract.md#connections `oauth_clients.kind`). */
export interface ResolvedClient {
  clientId: string;
  kind: 'preregistered' | 'dcr' | 'cimd';
  name: string | undefined;
  clientUri: string | undefined;
  applicationType: ApplicationType;
  redirectUris: string[];
}

/**
 * Characters that change how the text around them is shown without being seen themselves: controls (C0 and C1) and the
 * bidirectional formatting characters (Unicode UAX #9: embeddings, overrides, isolates and marks). A `client_name` is
 * written by anyone who can register, and shown inside sentences (the consent page, Connected apps, History): with a
 * right-to-left override it could show the words after it reversed, the host in parentheses included (the "Trojan
 * Source" class, CVE-2021-42574).
 */
const UNSEEN_CHARACTERS = /[\p{Cc}\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/u;

const EVERY_UNSEEN_CHARACTER = new RegExp(UNSEEN_CHARACTERS.source, 'gu');

/**
 * A stored client's name as the pages show it: any character of UNSEEN_CHARACTERS (in a name registered before they
 * were refused) as U+FFFD, seen where it was.
 */
export const displayName = (name: string): string => name.replace(EVERY_UNSEEN_CHARACTER, '\uFFFD');

/** Client metadata (RFC 7591 §2) this server honours; unknown fields are ignored, never stored. */
export const ClientMetadataSchema = z.object({
  redirect_uris: z.array(z.string()).min(1).max(10),
  token_endpoint_auth_method: z.string().max(100).optional(),
  grant_types: z.array(z.string().max(100)).max(5).optional(),
  response_types: z.array(z.string().max(100)).max(5).optional(),
  application_type: z.string().max(20).optional(),
  client_name: z
    .string()
    .max(200)
    .refine((name) => !UNSEEN_CHARACTERS.test(name), 'must not hold control or bidirectional formatting characters')
    .optional(),
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
  o: { operatorTrusted?: boolean; /** The host a CIMD document was fetched from. */ verifiedHost?: string } = {},
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
      description: field === 'body' ? 'Send a JSON object of client metadata' : `${field}: ${issueText(issue.message)}`,
    };
  }
  const m = parsed.data;
  // Public clients only (docs/contract.md#clients). RFC 7591 §3.2.1 lets the server replace requested metadata: a host
  // asking for a client secret method is registered as a public client and told so (`none`, no secret issued), since
  // such hosts exist in the field and PKCE protects a public client; other methods are refused.
  const method = m.token_endpoint_auth_method ?? 'none';
  if (!PUBLIC_CLIENT_REPLACES.includes(method)) {
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
    metadata: {
      ...withKnownScopes(
        withoutUnrelatedHosts(m, o.operatorTrusted ? undefined : relatedHosts(m.redirect_uris, o.verifiedHost)),
      ),
      application_type: applicationType,
      token_endpoint_auth_method: 'none',
    },
  };
}

/** Every scope value this server can grant, under its own name or an alias (domain/scopes.ts). */
const KNOWN_SCOPES = new Set<string>([...Object.values(SCOPES), ...Object.keys(ALIASES)]);

/**
 * RFC 7591 §2: `scope` lists the values the client may use when it asks for tokens, and the registration's answer is
 * what the server holds (§3.2.1, which lets it replace what was asked). So the values it never grants are left out
 * (`"mcp:read admin"` was stored and answered whole, saying `admin` could be asked for), and a scope with none left is
 * left out too. Consent, not this field, decides what a token holds; hosts in the field send `openid` and the like,
 * so an unknown value is dropped, not refused.
 */
function withKnownScopes<T extends ClientMetadata>(m: T): T {
  if (m.scope === undefined) return m;
  const { scope, ...rest } = m;
  const known = [...new Set(scope.split(' ').filter((s) => KNOWN_SCOPES.has(s)))];
  return (known.length ? { ...rest, scope: known.join(' ') } : rest) as T;
}

/** Methods a registration may ask for and still be registered, as a public client (`none`). */
const PUBLIC_CLIENT_REPLACES = ['none', 'client_secret_basic', 'client_secret_post'];

/** The hosts a client has shown it controls: its https redirect URIs' hosts, and the CIMD document's host. */
function relatedHosts(redirectUris: string[], verifiedHost: string | undefined): Set<string> {
  const hosts = new Set<string>();
  if (verifiedHost) hosts.add(bareHost(verifiedHost));
  for (const uri of redirectUris) if (uri.startsWith('https://')) hosts.add(bareHost(new URL(uri).hostname));
  return hosts;
}

const bareHost = (host: string) => host.toLowerCase().replace(/^www\./, '');

/**
 * RFC 7591 §5: a self-asserted `client_uri` or `logo_uri` on a host the client has not shown it controls would let it
 * borrow another's name on the consent page ("Claude (claude.ai)" redirecting to evil.example). Such values are left
 * out of the registration (§3.2.1 lets the server omit them); the consent page then shows the redirect host.
 */
function withoutUnrelatedHosts<T extends ClientMetadata>(m: T, related: Set<string> | undefined): T {
  if (!related) return m;
  const out = { ...m };
  for (const f of ['client_uri', 'logo_uri'] as const) {
    const v = out[f];
    if (v !== undefined && !related.has(bareHost(new URL(v).hostname))) delete out[f];
  }
  return out;
}

export function toResolved(
  clientId: string,
  kind: ResolvedClient['kind'],
  m: Pick<ClientMetadata, 'client_name' | 'client_uri' | 'redirect_uris' | 'application_type'>,
): ResolvedClient {
  return {
    clientId,
    kind,
    name: m.client_name === undefined ? undefined : displayName(m.client_name),
    clientUri: m.client_uri,
    applicationType: m.application_type === 'native' ? 'native' : 'web',
    redirectUris: m.redirect_uris,
  };
}
