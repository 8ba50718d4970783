/** Wraps a server-factory maker so that every server it builds bumps `counter.count` (to prove a fast path was taken). */
export function countedFactory<A extends unknown[], R extends unknown[], S>(
  make: (...args: A) => (...request: R) => S,
  counter: { count: number },
): (...args: A) => (...request: R) => S {
  return (...args) => {
    const factory = make(...args);
    return (...request) => {
      counter.count++;
      return factory(...request);
    };
  };
}
