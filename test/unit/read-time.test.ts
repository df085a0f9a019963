// A read form's timestamps from the database's text (readTime) are what rfc3339 makes of the
// same instant as a Date, for every form the databases give and for any other text.
import { describe, expect, it } from 'vitest';
import { readTime, rfc3339 } from '../../server/events/outbox.js';

describe('readTime', () => {
  it.each([
    ['SQLite, as the engine writes it', '2026-11-24T23:17:53.411+00:00'],
    ['PostgreSQL through to_char', '2026-11-24T23:17:53.411Z'],
    ['without a fraction', '2026-11-24T23:17:53Z'],
    ['a longer fraction', '2026-11-24T23:17:53.999999+00:00'],
    ['just before midnight', '1999-12-31T23:59:59.999Z'],
  ])('%s: %s is cut to its seconds', (_what, text) => {
    expect(readTime(text)).toBe(rfc3339(new Date(text)));
    expect(readTime(text)).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  });

  it.each([
    ['another offset', '2026-11-24T23:17:53.411+02:00', '2026-11-24T21:17:53Z'],
    ['a space for the T', '2026-11-24 23:17:53.411Z', '2026-11-24T23:17:53Z'],
    ['a negative offset across the date line', '2026-11-24T23:17:53-05:00', '2026-11-25T04:17:53Z'],
  ])('%s (%s) goes through a Date, so the instant stays right', (_what, text, want) => {
    expect(readTime(text)).toBe(want);
  });
});
