import { describe, expect, it } from 'vitest';
import { hostCheck, originProblem } from '../../src/mcp-kit/host-guard.js';

const ALLOWED = ['mcp.example', 'localhost'];

/** A host's check, counting how often it had to parse a Host against the allowlist. */
function counted() {
  let parses = 0;
  const check = hostCheck(() => {
    parses++;
    return ALLOWED;
  });
  return { check, parses: () => parses };
}

describe('hostCheck', () => {
  it('accepts the allowed names on any port and refuses the others, a missing Host included', () => {
    const { check } = counted();
    expect(check('mcp.example')).toBeUndefined();
    expect(check('localhost:4101')).toBeUndefined();
    expect(check('evil.example')).toBe('Invalid Host: evil.example');
    expect(check('evil.example:4101')).toBe('Invalid Host: evil.example');
    expect(check('mcp.example.evil.example')).toBe('Invalid Host: mcp.example.evil.example');
    expect(check(undefined)).toBe('Missing Host header');
    expect(check('')).toBe('Missing Host header');
  });

  it('remembers what it accepted, and nothing it refused', () => {
    const { check, parses } = counted();
    for (let i = 0; i < 5; i++) expect(check('localhost:4101')).toBeUndefined();
    expect(parses()).toBe(1);
    for (let i = 0; i < 5; i++) expect(check('evil.example:4101')).toBe('Invalid Host: evil.example');
    expect(parses()).toBe(6);
  });

  it('stays bounded under varied Hosts: past its memo it checks every value again, and still refuses', () => {
    const { check, parses } = counted();
    for (let port = 1; port <= 200; port++) expect(check(`localhost:${port}`)).toBeUndefined();
    expect(parses()).toBe(200);
    expect(check('localhost:1')).toBeUndefined(); // remembered
    expect(parses()).toBe(200);
    expect(check('localhost:200')).toBeUndefined(); // beyond the memo: parsed again
    expect(parses()).toBe(201);
    expect(check('evil.example:1')).toBe('Invalid Host: evil.example');
  });
});

describe('originProblem', () => {
  it('lets an absent Origin pass, and refuses a foreign or repeated one', () => {
    expect(originProblem(undefined, ALLOWED)).toBeUndefined();
    expect(originProblem('https://mcp.example', ALLOWED)).toBeUndefined();
    expect(originProblem('http://localhost:4101', ALLOWED)).toBeUndefined();
    expect(originProblem('https://evil.example', ALLOWED)).toMatch(/evil\.example/);
    expect(originProblem(['https://mcp.example', 'https://mcp.example'], ALLOWED)).toBe(
      'Send at most one Origin header',
    );
  });
});
