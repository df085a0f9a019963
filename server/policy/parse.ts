// Header and certificate readers behind the service's parsed variables: req.content_type,
// req.cookies and res.cookies, req.user_agent.*, conn.tls.client.*. Each runs only when a
// policy reads its variable (context.ts makes them lazily).
import { X509Certificate } from 'node:crypto';

export function contentType(raw: string): { type: string; parameters: Record<string, string>; raw: string } {
  const [type, ...params] = raw.split(';');
  const parameters: Record<string, string> = {};
  for (const p of params) {
    const i = p.indexOf('=');
    if (i <= 0) continue;
    parameters[p.slice(0, i).trim().toLowerCase()] = p.slice(i + 1).trim().replace(/^"(.*)"$/, '$1');
  }
  return { type: type.trim().toLowerCase(), parameters, raw };
}

/** `Cookie: a=1; b=2` headers as the service's map of names to lists of {name, value}, in the order sent. */
export function parseCookieHeader(values: readonly string[]): Record<string, { name: string; value: string }[]> {
  const out: Record<string, { name: string; value: string }[]> = {};
  for (const header of values) {
    for (const part of header.split(';')) {
      const i = part.indexOf('=');
      if (i <= 0) continue;
      const name = part.slice(0, i).trim();
      const value = part.slice(i + 1).trim().replace(/^"(.*)"$/, '$1');
      (out[name] ??= []).push({ name, value });
    }
  }
  return out;
}

/** `Set-Cookie` headers as the service's map of names to lists of cookies with their attributes. */
export function parseSetCookies(values: readonly string[]): Record<string, Record<string, unknown>[]> {
  const out: Record<string, Record<string, unknown>[]> = {};
  for (const header of values) {
    const [pair, ...attrs] = header.split(';');
    const i = pair.indexOf('=');
    if (i <= 0) continue;
    const name = pair.slice(0, i).trim();
    const cookie: Record<string, unknown> = { name, value: pair.slice(i + 1).trim(), domain: '', path: '', expires: new Date(0), max_age: 0n, secure: false, http_only: false, same_site: '', unparsed_attributes: {} };
    const unparsed: Record<string, string> = {};
    for (const a of attrs) {
      const j = a.indexOf('=');
      const key = (j < 0 ? a : a.slice(0, j)).trim();
      const value = j < 0 ? '' : a.slice(j + 1).trim();
      switch (key.toLowerCase()) {
        case 'domain':
          cookie.domain = value;
          break;
        case 'path':
          cookie.path = value;
          break;
        case 'expires': {
          const t = Date.parse(value);
          if (!Number.isNaN(t)) cookie.expires = new Date(t);
          break;
        }
        case 'max-age':
          if (/^-?\d+$/.test(value)) cookie.max_age = BigInt(value);
          break;
        case 'secure':
          cookie.secure = true;
          break;
        case 'httponly':
          cookie.http_only = true;
          break;
        case 'samesite':
          cookie.same_site = value;
          break;
        default:
          if (key) unparsed[key] = value;
      }
    }
    cookie.unparsed_attributes = unparsed;
    (out[name] ??= []).push(cookie);
  }
  return out;
}

export interface UserAgentVars { name: string; version: string; os: string; os_version: string; device: string; is_mobile: boolean; is_tablet: boolean; is_desktop: boolean; is_bot: boolean; url: string }

const BOT = /bot\b|bot\/|crawl|spider|slurp|curl\/|wget\/|python-requests|python-urllib|go-http-client|httpclient|okhttp|facebookexternalhit|headless|scrapy|libwww|java\/|gptbot|claudebot|ccbot|perplexity|bytespider/i;

/**
 * A User-Agent as the service's req.user_agent fields: the browser or client and its version,
 * the operating system, the kind of device, and whether it is a bot. A heuristic reader of
 * the common forms (not a full database of agents); docs/traffic-policy.md says so.
 */
export function parseUserAgent(ua: string): UserAgentVars {
  const out: UserAgentVars = { name: '', version: '', os: '', os_version: '', device: '', is_mobile: false, is_tablet: false, is_desktop: false, is_bot: false, url: '' };
  if (!ua) return out;
  out.url = /https?:\/\/[^\s;)]+/.exec(ua)?.[0] ?? '';
  const browsers: [RegExp, string][] = [
    [/Edg(?:e|A|iOS)?\/([\d.]+)/, 'Edge'],
    [/OPR\/([\d.]+)/, 'Opera'],
    [/SamsungBrowser\/([\d.]+)/, 'Samsung Internet'],
    [/Firefox\/([\d.]+)/, 'Firefox'],
    [/CriOS\/([\d.]+)/, 'Chrome'],
    [/Chrome\/([\d.]+)/, 'Chrome'],
    [/Version\/([\d.]+).*Safari\//, 'Safari'],
    [/MSIE ([\d.]+)/, 'IE'],
    [/Trident\/.*rv:([\d.]+)/, 'IE'],
  ];
  for (const [re, name] of browsers) {
    const m = re.exec(ua);
    if (m) {
      out.name = name;
      out.version = m[1];
      break;
    }
  }
  if (!out.name) {
    // A client such as curl/8.4.0 or Googlebot/2.1: its product token (the first, or the bot's).
    const m = /([A-Za-z][\w.-]*(?:bot|Bot|crawler|spider))\/([\w.]+)/.exec(ua) ?? /^([A-Za-z][\w.-]*)\/([\w.]+)/.exec(ua);
    if (m) {
      out.name = m[1];
      out.version = m[2];
    }
  }
  const oses: [RegExp, string, (v: string) => string][] = [
    [/Windows NT ([\d.]+)/, 'Windows', (v) => ({ '10.0': '10', '6.3': '8.1', '6.2': '8', '6.1': '7' })[v] ?? v],
    [/(?:iPhone|CPU) OS ([\d_]+)/, 'iOS', (v) => v.replaceAll('_', '.')],
    [/iPad.*OS ([\d_]+)/, 'iOS', (v) => v.replaceAll('_', '.')],
    [/Android ([\d.]+)/, 'Android', (v) => v],
    [/Mac OS X ([\d_.]+)/, 'macOS', (v) => v.replaceAll('_', '.')],
    [/CrOS \S+ ([\d.]+)/, 'ChromeOS', (v) => v],
    [/Linux/, 'Linux', () => ''],
  ];
  for (const [re, name, version] of oses) {
    const m = re.exec(ua);
    if (m) {
      out.os = name;
      out.os_version = version(m[1] ?? '');
      break;
    }
  }
  out.is_bot = BOT.test(ua);
  out.is_tablet = /iPad|Tablet|Android(?!.*Mobile)/.test(ua) && out.os !== '' && out.os !== 'Linux';
  out.is_mobile = !out.is_tablet && /Mobi|iPhone|iPod|Android.*Mobile|Windows Phone/.test(ua);
  out.is_desktop = !out.is_bot && !out.is_mobile && !out.is_tablet && /Windows NT|Macintosh|X11|CrOS/.test(ua);
  out.device = /iPhone/.test(ua) ? 'iPhone' : /iPad/.test(ua) ? 'iPad' : out.is_mobile ? 'Mobile' : out.is_tablet ? 'Tablet' : out.is_bot ? 'Bot' : out.is_desktop ? 'Desktop' : '';
  return out;
}

const NAME_FIELDS: Record<string, string> = { CN: 'common_name', C: 'country', L: 'locality', O: 'organization', OU: 'organizational_unit', postalCode: 'postal_code', ST: 'province', street: 'street_address' };

function nameVars(text: string | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = { common_name: '', country: [], locality: [], organization: [], organizational_unit: [], postal_code: [], province: [], street_address: [] };
  const parts: string[] = [];
  for (const line of (text ?? '').split('\n')) {
    const i = line.indexOf('=');
    if (i <= 0) continue;
    const key = line.slice(0, i);
    const value = line.slice(i + 1);
    parts.push(`${key}=${value}`);
    const field = NAME_FIELDS[key];
    if (field === 'common_name') out.common_name = value;
    else if (field) (out[field] as string[]).push(value);
  }
  // The whole name as Go's pkix.Name.String(): most significant last, comma-separated.
  return { ...out, $text: parts.reverse().join(',') };
}

export interface CertificateVars { [name: string]: unknown }

/** A certificate's conn.tls.client (or .server) fields; an absent one has every field empty. */
export function certificateVars(cert: string | Buffer | X509Certificate | undefined): CertificateVars {
  const x = cert === undefined ? undefined : cert instanceof X509Certificate ? cert : new X509Certificate(cert);
  const subject = nameVars(x?.subject);
  const issuer = nameVars(x?.issuer);
  const san = { dns_names: [] as string[], email_addresses: [] as string[], ip_addresses: [] as string[], uris: [] as string[] };
  for (const entry of (x?.subjectAltName ?? '').split(/,\s*/)) {
    const i = entry.indexOf(':');
    if (i <= 0) continue;
    const kind = entry.slice(0, i);
    const value = entry.slice(i + 1);
    if (kind === 'DNS') san.dns_names.push(value);
    else if (kind === 'email') san.email_addresses.push(value);
    else if (kind === 'IP Address') san.ip_addresses.push(value);
    else if (kind === 'URI') san.uris.push(value);
  }
  const own = (v: Record<string, unknown>) => {
    const { $text, ...rest } = v;
    return [rest, $text as string] as const;
  };
  const [subjectFields, subjectText] = own(subject);
  const [issuerFields, issuerText] = own(issuer);
  return {
    subject: subjectFields,
    subject$: subjectText,
    issuer: issuerFields,
    issuer$: issuerText,
    san,
    san$: x?.subjectAltName ?? '',
    serial_number: x?.serialNumber.toLowerCase() ?? '',
    signature_algorithm: '',
    pem: x?.toString() ?? '',
    validity: { not_before: new Date(x ? Date.parse(x.validFrom) : 0), not_after: new Date(x ? Date.parse(x.validTo) : 0) },
    extensions: [],
  };
}
