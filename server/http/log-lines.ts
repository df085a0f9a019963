// The server's log lines to stdout, written once per turn of the event loop: a line per
// request was a write(2) per request (a tenth of a GET's CPU with the line's JSON). Lines
// keep their order (every stdout line of the server goes through this one writer), are
// written before the loop waits for I/O again (setImmediate), and whatever is pending when
// the process exits is written then.
let pending = '';

function flush() {
  if (!pending) return;
  const chunk = pending;
  pending = '';
  process.stdout.write(chunk);
}

let hooked = false;

/** Writes one line (without its newline) to stdout, in order with every other line written here. */
export function logLine(line: string): void {
  if (!hooked) {
    hooked = true;
    process.once('exit', flush);
  }
  if (!pending) setImmediate(flush);
  pending += `${line}\n`;
}
