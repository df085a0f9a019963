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
