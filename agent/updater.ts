// Self-update: the server offers the build it ships (version, sha256, size); an agent of an
// older version with the same major accepts, receives the bundle over its connection,
// verifies its digest, and stages it; the next restart runs it. One state per agent:
// idle -> updating -> updated (until the process restarts).
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { AGENT_CODES, compareVersions, majorOf, type CommandRefusal, type UpdateOffer } from './protocol.js';

export interface Staged { version: string; sha256: string; file: string }

const STAGED = 'staged.json';
/** An update whose bundle never comes back to idle after this long. */
const UPDATE_TIMEOUT_MS = 120_000;

export class Updater {
  private state: 'idle' | 'updating' | 'updated' = 'idle';
  private offer?: UpdateOffer;
  private timer?: NodeJS.Timeout;

  constructor(private version: string, private enabled: boolean, private stateDir: string, private log: (msg: string) => void) {}

  /** Accepts an offer, or says which of SPEC's four reasons refuses it. */
  accept(offer: UpdateOffer | undefined): CommandRefusal | undefined {
    if (!this.enabled) return { error_code: AGENT_CODES.updateChecksOff, msg: 'the agent runs with update checks disabled (--no-update-check or update_check: false)' };
    if (this.state === 'updated') return { error_code: AGENT_CODES.updatedNotRestarted, msg: `the agent already updated to ${this.offer?.version} and has not restarted; call restart to run it` };
    if (this.state === 'updating') return { error_code: AGENT_CODES.updating, msg: 'the agent is already updating; wait, then restart it' };
    if (!offer) return { error_code: AGENT_CODES.noUpdate, msg: 'no update is available: the server has no agent build to offer' };
    if (majorOf(offer.version) !== majorOf(this.version)) return { error_code: AGENT_CODES.noUpdate, msg: `no update is available: the server's agent ${offer.version} is another major version than ${this.version}, and an update never crosses a major version` };
    if (compareVersions(offer.version, this.version) <= 0) return { error_code: AGENT_CODES.noUpdate, msg: `no update is available: the agent runs ${this.version} and the server offers ${offer.version}` };
    this.state = 'updating';
    this.offer = offer;
    this.timer = setTimeout(() => this.abandon('the bundle did not arrive'), UPDATE_TIMEOUT_MS);
    this.timer.unref();
    this.log(`updating from ${this.version} to ${offer.version}`);
    return undefined;
  }

  private abandon(why: string) {
    clearTimeout(this.timer);
    if (this.state === 'updating') this.state = 'idle';
    this.log(`update failed: ${why}`);
  }

  /** Streams the bundle to a temporary file, checks its digest and size, then stages it. */
  async receive(body: Readable): Promise<boolean> {
    const offer = this.offer;
    if (this.state !== 'updating' || !offer) {
      body.resume();
      return false;
    }
    fs.mkdirSync(this.stateDir, { recursive: true, mode: 0o700 });
    const file = path.join(this.stateDir, `edgeform-agent-${offer.version.replace(/[^0-9A-Za-z.-]/g, '_')}.cjs`);
    const temp = `${file}.${process.pid}.part`;
    const hash = createHash('sha256');
    let size = 0;
    try {
      await new Promise<void>((resolve, reject) => {
        const out = fs.createWriteStream(temp, { mode: 0o600 });
        body.on('data', (c: Buffer) => { hash.update(c); size += c.length; if (size > offer.size) body.destroy(new Error('the bundle is larger than offered')); });
        body.on('error', reject);
        out.on('error', reject);
        out.on('finish', resolve);
        body.pipe(out);
      });
      const digest = hash.digest('hex');
      if (digest !== offer.sha256 || size !== offer.size) throw new Error(`the bundle's sha256 ${digest} (${size} bytes) is not the offered ${offer.sha256} (${offer.size} bytes)`);
      fs.renameSync(temp, file);
      fs.writeFileSync(path.join(this.stateDir, STAGED), JSON.stringify({ version: offer.version, sha256: digest, file } satisfies Staged));
      clearTimeout(this.timer);
      this.state = 'updated';
      this.log(`update to ${offer.version} verified and staged; it runs at the next restart`);
      return true;
    } catch (e) {
      fs.rmSync(temp, { force: true });
      this.abandon((e as Error).message);
      return false;
    }
  }

  /** The staged build to run at restart, if it is newer than this one and its file still matches. */
  staged(): Staged | undefined {
    try {
      const s = JSON.parse(fs.readFileSync(path.join(this.stateDir, STAGED), 'utf8')) as Staged;
      if (compareVersions(s.version, this.version) <= 0 || majorOf(s.version) !== majorOf(this.version)) return undefined;
      const digest = createHash('sha256').update(fs.readFileSync(s.file)).digest('hex');
      return digest === s.sha256 ? s : undefined;
    } catch {
      return undefined;
    }
  }
}
