import type { PublicDocument } from '../http/public-documents.js';
import { createHash } from 'node:crypto';

/** A machine-readable companion for agents (docs/contract.md#surfaces). */
export type Companion = PublicDocument;

/** The `sha256:<hex>` digest of the exact bytes a document is served as (Agent Skills Discovery `digest`). */
export function sha256Digest(body: string): string {
  return `sha256:${createHash('sha256').update(body, 'utf8').digest('hex')}`;
}

export const json = (value: unknown): string => `${JSON.stringify(value, null, 2)}\n`;
