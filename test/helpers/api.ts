// Assertions on the API's wire conventions, shared by the end-to-end suites.
import { expect } from 'vitest';
import { ERRORS } from '../../server/http/errors.js';
import type { Reply } from './server.js';

/**
 * The DECISIONS error shape: a registry code whose status is the reply's, a sentence,
 * and details carrying the operation id that the Service-Operation-Id header also carries.
 */
export function expectError(r: Reply, status: number, code?: keyof typeof ERRORS) {
  expect(r.status, r.text).toBe(status);
  expect(r.headers.get('content-type')).toMatch(/^application\/json/);
  const body = r.body as { error_code: keyof typeof ERRORS; status_code: number; msg: string; details: Record<string, unknown> };
  if (code) expect(body.error_code).toBe(code);
  expect(ERRORS[body.error_code], `${body.error_code} is in the registry`).toBeDefined();
  expect(ERRORS[body.error_code].status).toBe(status);
  expect(body.status_code).toBe(status);
  expect(typeof body.msg).toBe('string');
  expect(body.msg.length).toBeGreaterThan(0);
  expect(body.details.operation_id).toMatch(/^op_[0-9A-Za-z]{27}$/);
  expect(body.details.operation_id).toBe(r.headers.get('service-operation-id'));
  return body;
}

/** A 400 validation error naming the field. */
export function expectInvalid(r: Reply, field: string, code: keyof typeof ERRORS = 'ERR_SERVICE_103') {
  const body = expectError(r, 400, code);
  expect(body.details.field).toBe(field);
  return body;
}

export const ID = /^[a-z]+_[0-9A-Za-z]{27}$/;
export const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

/** An id that has the right prefix and shape but names nothing. */
export const unknownId = (prefix: string) => `${prefix}_${'0'.repeat(9)}${'Z'.repeat(18)}`;
