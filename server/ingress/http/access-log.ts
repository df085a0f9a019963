// The access-log line of one HTTPS request, written as text rather than through a generic
// JSON.stringify of an object (which was about a tenth of an http_response request's CPU).
// The line is exactly what logLine() would make of the same fields: time, level, msg, then the
// fields in a fixed order, absent ones left out. Every string that a client can influence
// (method, host, path) or that comes from the store (ids, code) goes through jsonString, which
// escapes as JSON.stringify does; numbers are numbers the edge computed.
import { isoNow, jsonNumber as num, jsonString, millis } from '../../log-lines.js';

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
  /** Why the edge answered with `code` (backend and tunnel ids, labels), which the client's page leaves out. */
  detail?: string;
}

export function accessLogLine(f: AccessLogFields): string {
  return `{"time":"${isoNow()}","level":"info","msg":"ingress request"${f.edge ? `,"edge":${jsonString(f.edge)}` : ''}${f.route ? `,"route":${jsonString(f.route)}` : ''}${
    f.method === undefined ? '' : `,"method":${jsonString(f.method)}`},"host":${jsonString(f.host)},"port":${num(f.port)},"path":${jsonString(f.path)}${
    f.status === undefined ? '' : `,"status":${num(f.status)}`},"duration_ms":${millis(f.duration_ms)},"bytes":${num(f.bytes)},"client_ip":${jsonString(f.client_ip)}${
    f.code === undefined ? '' : `,"code":${jsonString(f.code)}`}${f.detail === undefined ? '' : `,"detail":${jsonString(f.detail)}`}}`;
}
