import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, Level, Logger } from 'pino';

type LogMethod = (...args: unknown[]) => void;

/**
 * A request's logger, made into a real pino child only when something is logged. Fastify gives every request a child
 * logger bound to its id; building one (bindings serialised, levels set) costs about a microsecond, on every
 * request, although most requests log nothing at the configured level.
 */
export class DeferredChildLogger {
  private made: Logger | undefined;

  constructor(
    private readonly parent: Logger,
    private readonly bindings: Bindings,
    private readonly options: ChildLoggerOptions,
  ) {}

  private get real(): Logger {
    this.made ??= this.parent.child(this.bindings, this.options);
    return this.made;
  }

  get level(): string {
    return (this.made ?? this.parent).level;
  }

  set level(level: string) {
    this.real.level = level;
  }

  isLevelEnabled(level: string): boolean {
    return (this.made ?? this.parent).isLevelEnabled(level);
  }

  private log(level: Level, args: unknown[]): void {
    if (this.isLevelEnabled(level)) (this.real[level] as LogMethod)(...args);
  }

  fatal = (...args: unknown[]) => this.log('fatal', args);
  error = (...args: unknown[]) => this.log('error', args);
  warn = (...args: unknown[]) => this.log('warn', args);
  info = (...args: unknown[]) => this.log('info', args);
  debug = (...args: unknown[]) => this.log('debug', args);
  trace = (...args: unknown[]) => this.log('trace', args);
  silent = () => {};

  child(bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.real.child(bindings, options) as unknown as FastifyBaseLogger;
  }
}

export function deferredChildLogger(
  logger: FastifyBaseLogger,
  bindings: Bindings,
  options: ChildLoggerOptions,
): FastifyBaseLogger {
  return new DeferredChildLogger(
    logger as unknown as Logger,
    bindings,
    options,
  ) as unknown as FastifyBaseLogger;
}
