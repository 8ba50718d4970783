import { createHook } from 'node:async_hooks';
import process from 'node:process';

/**
 * Keeps one of `process.nextTick`'s queue entries alive for the life of the process, so that V8 never forgets their
 * shape. Every `nextTick` makes a `{ [async_id_symbol], [trigger_async_id_symbol], callback, args }` object, and
 * node:http and its streams call it four to six times per request (ending the request's body, after each write, when
 * the response finishes). V8 (11.3, Node 20) records, per property of that literal, the one hidden class it saw; the
 * hidden classes are held weakly, so a full garbage collection at a moment when no entry is queued (an idle server:
 * V8's memory reducer runs such collections once load stops) may drop them, and the next entry is built with new
 * ones. That property store has no polymorphic state: seeing a second hidden class, it turns megamorphic for good, and
 * every entry is from then on built through V8's runtime (`DefineKeyedOwnPropertyInLiteral`, about 1 µs each), in
 * every function that inlines `nextTick`. It happened to most processes of the bench that sat idle before their load
 * (`bench/tick-shape.mjs` reproduces it); a plain `node:http` server inside such a process cost ~20 % more per request.
 * A kept entry holds its hidden class, and with it the chain the literal builds, so the recorded shape stays the one
 * every new entry gets.
 *
 * The entry is taken from a real `nextTick` call (an async hook's `init` sees it, enabled only for that call), made
 * like node:http's own: a plain function and one argument. Docs: docs/performance.md (lever 32).
 */
let kept: object | undefined;

export function keepTickObjectShape(): void {
  if (kept) return;
  const hook = createHook({
    init(_asyncId, type, _triggerAsyncId, resource) {
      if (type === 'TickObject' && kept === undefined) kept = resource;
    },
  });
  hook.enable();
  try {
    process.nextTick(ignore, 0);
  } finally {
    hook.disable();
  }
}

function ignore(_value: number): void {}
