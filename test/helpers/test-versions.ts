import { VersionRegistry } from '../../src/versions/registry.js';
import { BASELINE_VERSION, RELEASED_VERSIONS } from '../../src/versions/versions.js';

/** A test-only version older than every released one. */
export const OLD_VERSION = '2026-03-01.acacia';

/**
 * The released registry with one older version in front. The released baseline gains a test change module —
 * "image_url was called avatar_url before" — so that rendering for the old version must rewrite the response.
 */
export const testVersions = new VersionRegistry(
  [
    { id: OLD_VERSION, changes: [] },
    ...RELEASED_VERSIONS.map((v) =>
      v.id === BASELINE_VERSION
        ? {
            ...v,
            changes: [
              ...v.changes,
              {
                description: 'image_url was called avatar_url',
                resource: 'user' as const,
                down: ({ image_url, ...rest }: Record<string, unknown>) => ({
                  ...rest,
                  avatar_url: image_url,
                }),
              },
            ],
          }
        : v,
    ),
  ],
  BASELINE_VERSION,
);
