// Ids sort by creation: 9 base62 digits of milliseconds, then 18 random ones that count up
// within a millisecond, so ids made one after another in a process are strictly increasing.
import { describe, expect, it } from 'vitest';
import { isIdOf, newId, newIdBody } from '../../server/store/ids.js';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const msOf = (body: string) => [...body.slice(0, 9)].reduce((n, c) => n * 62 + ALPHABET.indexOf(c), 0);

describe('ids', () => {
  it('are 27 base62 characters after the prefix, strictly increasing byte-wise however fast they are made', () => {
    let previous = newIdBody();
    for (let i = 0; i < 50_000; i++) {
      const body = newIdBody();
      expect(body).toMatch(/^[0-9A-Za-z]{27}$/);
      if (!(body > previous)) expect.fail(`${body} does not sort after ${previous}`);
      previous = body;
    }
    expect(isIdOf('ipp', newId('ipp'))).toBe(true);
  });

  it('begin with the time they were made, to the millisecond', () => {
    const before = Date.now();
    const body = newIdBody();
    // Within a busy millisecond the time part may run ahead of the clock, never behind it.
    expect(msOf(body)).toBeGreaterThanOrEqual(before);
    expect(msOf(body)).toBeLessThan(Date.now() + 1000);
  });

  it('have random parts that differ from one millisecond to the next', () => {
    const parts = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const start = Date.now();
      while (Date.now() === start) { /* the next millisecond */ }
      parts.add(newIdBody().slice(9, 20));
    }
    expect(parts.size).toBe(20);
  });
});
