import { ApiError } from '../http/errors.js';

/**
 * API versions as data (docs/contract.md#versioning). Each version lists the change modules it introduced; a response is always built in
 * the newest shape and then walked back, newest change first, to the version the caller asked for. So a new version
 * costs one entry and one module, and the code that builds responses never branches on versions.
 */

export type ResourceName = 'user';
export type ResourceObject = Record<string, unknown>;

/** One backwards-incompatible change, and how to undo it for callers on older versions. */
export interface ChangeModule {
  description: string;
  resource: ResourceName;
  /** Turns an object in this version's shape into the previous version's shape. */
  down(object: ResourceObject): ResourceObject;
}

export interface ApiVersion {
  /** `YYYY-MM-DD.codename` */
  id: string;
  /** What changed in this version relative to the one before it. */
  changes: readonly ChangeModule[];
}

export const VERSION_HEADER = 'Svc-Version';
const VERSION_FORMAT = /^\d{4}-\d{2}-\d{2}\.[a-z]+$/;

export class VersionRegistry {
  readonly ids: readonly string[];

  /** @param versions ordered oldest first; @param baseline the version of callers with no header and no pin. */
  constructor(
    readonly versions: readonly ApiVersion[],
    readonly baseline: string,
  ) {
    this.ids = versions.map((v) => v.id);
    if (!this.ids.includes(baseline)) throw new Error(`baseline ${baseline} is not a registered version`);
    for (const id of this.ids) if (!VERSION_FORMAT.test(id)) throw new Error(`malformed version id ${id}`);
  }

  get latest(): string {
    return this.ids[this.ids.length - 1]!;
  }

  has(id: string | null | undefined): id is string {
    return typeof id === 'string' && this.ids.includes(id);
  }

  /** Renders an object built in the latest shape in `version`'s shape. The latest version is returned untouched. */
  render(resource: ResourceName, object: ResourceObject, version: string): ResourceObject {
    const target = this.ids.indexOf(version);
    let out = object;
    for (let i = this.versions.length - 1; i > target; i--) {
      for (const change of this.versions[i]!.changes)
        if (change.resource === resource) out = change.down(out);
    }
    return out;
  }

  /**
   * The version named by the request header, or undefined when the header is absent.
   * Empty, repeated, malformed and unknown values are errors (400 invalid_api_version) rather than a silent fallback:
   * a caller who asked for a shape must not receive another one.
   */
  fromHeader(rawHeaders: readonly string[]): string | undefined {
    const values: string[] = [];
    for (let i = 0; i < rawHeaders.length; i += 2) {
      if (rawHeaders[i]!.toLowerCase() === 'svc-version') values.push(rawHeaders[i + 1]!);
    }
    if (values.length === 0) return undefined;
    const supported = `supported versions: ${this.ids.join(', ')}`;
    const fail = (why: string) =>
      new ApiError('invalid_api_version', `${why}; ${supported}`, { param: VERSION_HEADER });
    if (values.length > 1) throw fail(`${VERSION_HEADER} was sent ${values.length} times; send it once`);
    const value = values[0]!.trim();
    if (value === '') throw fail(`${VERSION_HEADER} is empty`);
    if (!VERSION_FORMAT.test(value))
      throw fail(`${VERSION_HEADER} "${value}" is not of the form YYYY-MM-DD.codename`);
    if (!this.has(value)) throw fail(`${VERSION_HEADER} "${value}" is not a supported version`);
    return value;
  }
}
