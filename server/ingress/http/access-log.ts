// The access-log line of one HTTPS request, written as text rather than through a generic
// JSON.stringify of an object (which was about a tenth of an http_response request's CPU).
// The line is exactly what logLine() would make of the same fields: time, level, msg, then the
// fields in a fixed order, absent ones left out. Every string that a client can influence
// (method, host, path) or that comes from the store (ids, code) goes through jsonString, which
// escapes as JSON.stringify does; numbers are numbers the edge computed.
import { isoNow } from '../../log-lines.js';

export interface AccessLogFields {
  /** Empty when no edge or route served the request: left out of the line. */
  edge: string;
  route: string;
  method: string | undefined;
  host: string;
  port: number;
  /** Without the query. */
  path: string;
  status: number | undefined;
  /** Written to the microsecond. */
  duration_ms: number;
  bytes: number;
  client_ip: string;
  code: string | undefined;
}

/** Characters a JSON string cannot hold raw (quote, backslash, controls) or must escape to stay well-formed (surrogates). */
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

/** `s` as a JSON string literal: the common case (nothing to escape) without JSON.stringify. */
export function jsonString(s: string): string {
  return NEEDS_ESCAPE.test(s) ? JSON.stringify(s) : `"${s}"`;
}

/** Finite numbers as JSON writes them; anything else (NaN, Infinity) as null, as JSON.stringify does. */
const num = (n: number) => (Number.isFinite(n) ? `${n}` : 'null');

/**
 * Milliseconds to the microsecond, as decimal text made from integers: the same number as
 * Math.round(ms * 1000) / 1000 once parsed, without formatting a double (which was a fifth of
 * the line's cost). Trailing zeros are kept ("1.050"): JSON reads them as the same number.
 */
export function millis(ms: number): string {
  const us = Math.round(ms * 1000);
  if (!(us >= 0 && us < 2 ** 31)) return num(us / 1000);
  const whole = Math.floor(us / 1000);
  const frac = us - whole * 1000;
  return frac === 0 ? `${whole}` : `${whole}.${frac < 10 ? '00' : frac < 100 ? '0' : ''}${frac}`;
}

export function accessLogLine(f: AccessLogFields): string {
  return `{"time":"${isoNow()}","level":"info","msg":"ingress request"${f.edge ? `,"edge":${jsonString(f.edge)}` : ''}${f.route ? `,"route":${jsonString(f.route)}` : ''}${
    f.method === undefined ? '' : `,"method":${jsonString(f.method)}`},"host":${jsonString(f.host)},"port":${num(f.port)},"path":${jsonString(f.path)}${
    f.status === undefined ? '' : `,"status":${num(f.status)}`},"duration_ms":${millis(f.duration_ms)},"bytes":${num(f.bytes)},"client_ip":${jsonString(f.client_ip)}${
    f.code === undefined ? '' : `,"code":${jsonString(f.code)}`}}`;
}
