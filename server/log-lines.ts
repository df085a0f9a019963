// The server's log lines on standard output, written in batches rather than one write call
// each: a busy ingress logs a line per request, and a write per line was a system call per
// request (once per event-loop turn was still one every few requests). Lines keep their
// order; what is pending is written FLUSH_MS after the first of them, when it passes 64 KiB,
// whenever flushLogLines() is called (the server's close does, first and last, so its own
// lines around it stay in order), and when the process exits.
let pending: string[] = [];
let size = 0;
let scheduled = false;
let hooked = false;

/** How long a line may wait for others to share its write. */
export const FLUSH_MS = 10;

export function flushLogLines(): void {
  scheduled = false;
  if (!pending.length) return;
  const text = pending.join('');
  pending = [];
  size = 0;
  process.stdout.write(text);
}

export function writeLogLine(line: string): void {
  pending.push(`${line}\n`);
  size += line.length + 1;
  if (!hooked) {
    hooked = true;
    process.on('exit', flushLogLines);
  }
  if (size > 64 * 1024) return flushLogLines();
  if (!scheduled) {
    scheduled = true;
    // Unref'd: a pending line never keeps the process alive (exit flushes it).
    setTimeout(flushLogLines, FLUSH_MS).unref();
  }
}

let second = -1;
let secondText = '';
let lastMs = -1;
let lastText = '';

/**
 * new Date().toISOString(), made from a per-second prefix and kept for its millisecond (a busy
 * ingress logs several lines in one): a log line per request made a Date and its text each time.
 */
export function isoNow(): string {
  const now = Date.now();
  if (now === lastMs) return lastText;
  const s = Math.floor(now / 1000);
  if (s !== second) {
    second = s;
    secondText = new Date(s * 1000).toISOString().slice(0, 20);
  }
  const ms = now - s * 1000;
  lastMs = now;
  lastText = `${secondText}${ms < 10 ? '00' : ms < 100 ? '0' : ''}${ms}Z`;
  return lastText;
}

// Log lines written as text rather than through JSON.stringify of an object (a tenth of an
// edge answer's CPU, a fiftieth of an API read's): the text is what JSON.stringify would make.

/** Characters a JSON string cannot hold raw (quote, backslash, controls) or must escape to stay well-formed (surrogates). */
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

/** `s` as a JSON string literal: the common case (nothing to escape) without JSON.stringify. */
export function jsonString(s: string): string {
  return NEEDS_ESCAPE.test(s) ? JSON.stringify(s) : `"${s}"`;
}

/** Finite numbers as JSON writes them; anything else (NaN, Infinity) as null, as JSON.stringify does. */
export const jsonNumber = (n: number) => (Number.isFinite(n) ? `${n}` : 'null');

/**
 * Milliseconds to the microsecond, as decimal text made from integers: the same number as
 * Math.round(ms * 1000) / 1000 once parsed, without formatting a double (which was a fifth of
 * the line's cost). Trailing zeros are kept ("1.050"): JSON reads them as the same number.
 */
export function millis(ms: number): string {
  const us = Math.round(ms * 1000);
  if (!(us >= 0 && us < 2 ** 31)) return jsonNumber(us / 1000);
  const whole = Math.floor(us / 1000);
  const frac = us - whole * 1000;
  return frac === 0 ? `${whole}` : `${whole}.${frac < 10 ? '00' : frac < 100 ? '0' : ''}${frac}`;
}

/** The API's line for one request (docs/api.md, "Request log"): logLine's text for these fields, made directly. */
export function requestLogLine(level: 'info' | 'error', method: string, path: string, status: number, ms: number, operationId: string): string {
  return `{"time":"${isoNow()}","level":"${level}","method":${jsonString(method)},"path":${jsonString(path)},"status":${jsonNumber(status)},"duration_ms":${millis(ms)},"operation_id":${jsonString(operationId)}}`;
}

/**
 * JSON.stringify({ time, level: 'info', ...fields }): the same text, made without copying
 * `fields` when they begin with their level (the access log's lines do).
 */
export function logLine(fields: Record<string, unknown>): string {
  for (const first in fields) {
    if (first === 'level') return `{"time":"${isoNow()}",${JSON.stringify(fields).slice(1)}`;
    break;
  }
  return JSON.stringify({ time: isoNow(), level: 'info', ...fields });
}
