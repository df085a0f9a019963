// The server's log lines on standard output, written once per turn of the event loop rather
// than one write call each: a busy ingress logs a line per request, and a write per line was
// a system call per request. Lines keep their order; what is pending is written at the end of
// the turn, when it passes 64 KiB, whenever flushLogLines() is called (the server's close
// does, first and last, so its own lines around it stay in order), and when the process exits.
let pending: string[] = [];
let size = 0;
let scheduled = false;
let hooked = false;

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
    setImmediate(flushLogLines);
  }
}
