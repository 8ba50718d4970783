import { describe, expect, it } from 'vitest';
import { afterTurnAnswers, endOfTurn } from '../../src/base/turn-end.js';

/** The next turn of the event loop, after everything this one queued. */
const nextTurn = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

describe('the end of the event loop turn', () => {
  it('is one promise for every caller of a turn, and a new one in the next turn', async () => {
    const first = endOfTurn();
    expect(endOfTurn()).toBe(first);
    await first;
    await nextTurn();
    expect(endOfTurn()).not.toBe(first);
    await endOfTurn();
  });

  it('comes after the work of the turn: answers waiting for it are written after every request of the turn', async () => {
    const order: string[] = [];
    // Two "requests" of one turn, each waiting for the turn's end before answering, and work the turn still does
    // after the first has begun waiting (another request read in the same poll phase).
    const answer = async (name: string) => {
      order.push(`${name} worked out`);
      await endOfTurn();
      order.push(`${name} written`);
    };
    const a = answer('a');
    const b = answer('b');
    order.push('the turn goes on');
    await Promise.all([a, b]);
    expect(order).toEqual(['a worked out', 'b worked out', 'the turn goes on', 'a written', 'b written']);
  });

  it('runs what comes after the answers once they are written, even when it was asked for first', async () => {
    const order: string[] = [];
    // The store's shared read asks at the turn's first read, before any answer waits (store/prepared.ts).
    afterTurnAnswers(() => order.push('shared read ended'));
    const answers = ['a', 'b', 'c'].map(async (name) => {
      await endOfTurn();
      order.push(`${name} written`);
    });
    await Promise.all(answers);
    await nextTurn();
    expect(order).toEqual(['a written', 'b written', 'c written', 'shared read ended']);
  });

  it('runs what comes after the answers by the end of the turn when no answer waits', async () => {
    let ended = false;
    afterTurnAnswers(() => {
      ended = true;
    });
    expect(ended).toBe(false);
    // Queued after the turn's end: it runs in the same check phase, before the loop polls again.
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(ended).toBe(true);
  });
});
