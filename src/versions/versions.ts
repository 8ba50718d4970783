import { type ApiVersion, VersionRegistry } from './registry.js';

/**
 * The released versions, oldest first. To release a change: add a version here whose `changes` hold a module from
 * `./changes/` that turns the new shape back into the old one. Never edit a released version's changes.
 */
export const RELEASED_VERSIONS: readonly ApiVersion[] = [{ id: '2026-09-24.albus', changes: [] }];

/** Callers with no header and no pin get this version (docs/contract.md#versioning). */
export const BASELINE_VERSION = '2026-09-24.albus';

export const versions = new VersionRegistry(RELEASED_VERSIONS, BASELINE_VERSION);
