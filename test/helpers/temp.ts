// Fresh folders for a test, under the system's temporary folder, removed together.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const dirs: string[] = [];

/** A fresh folder, removed by removeTempDirs (call from afterAll). */
export function tempDir(prefix = 'edgeform-cli-'): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  dirs.push(d);
  return d;
}

export function removeTempDirs() {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
}
