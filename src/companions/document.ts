import { createHash } from 'node:crypto';

/** A public, machine-readable document served as it is (SPEC §1 companions). */
export interface Companion {
  /** Path on its host, e.g. `/llms.txt`. */
  path: string;
  contentType: string;
  body: string;
}

/** The `sha256:<hex>` digest of the exact bytes a document is served as (Agent Skills Discovery `digest`). */
export function sha256Digest(body: string): string {
  return `sha256:${createHash('sha256').update(body, 'utf8').digest('hex')}`;
}

export const json = (value: unknown): string => `${JSON.stringify(value, null, 2)}\n`;
