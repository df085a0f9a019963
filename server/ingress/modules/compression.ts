// compression: gzip or br, as the client's Accept-Encoding prefers (br on a tie), chosen from
// the final response head. Skipped for bodies already encoded, types that are compressed
// already (images but SVG, audio, video, archives, fonts), bodies under 1 KiB, ranges, HEAD,
// and answers with no body. Each write is flushed, so streamed answers keep streaming.
import type { Transform } from 'node:stream';
import zlib from 'node:zlib';
import type { FilterFactory, ResponseHead } from '../types.js';

export const MIN_COMPRESS_BYTES = 1024;

const COMPRESSED = /^(image\/(?!svg)|audio\/|video\/|font\/woff2?|application\/(zip|gzip|x-gzip|x-bzip2|x-7z-compressed|x-rar-compressed|zstd|x-xz|pdf|octet-stream|wasm))/i;

/** The encoding to use for an Accept-Encoding value, or undefined. */
export function chooseEncoding(accept: string | undefined): 'br' | 'gzip' | undefined {
  if (!accept) return undefined;
  const q: Record<string, number> = {};
  for (const part of accept.split(',')) {
    const [name, ...params] = part.trim().toLowerCase().split(';');
    const qp = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    q[name] = qp ? Number(qp.slice(2)) || 0 : 1;
  }
  const of = (n: string) => q[n] ?? (n !== 'identity' ? q['*'] : undefined) ?? 0;
  const br = of('br');
  const gzip = of('gzip');
  if (br <= 0 && gzip <= 0) return undefined;
  return br >= gzip ? 'br' : 'gzip';
}

export function worthCompressing(head: ResponseHead, method: string): boolean {
  const h = head.headers;
  if (method === 'HEAD' || head.status < 200 || head.status === 204 || head.status === 206 || head.status === 304) return false;
  if (h['content-encoding'] !== undefined && String(h['content-encoding']).toLowerCase() !== 'identity') return false;
  if (COMPRESSED.test(String(h['content-type'] ?? ''))) return false;
  const length = h['content-length'];
  return length === undefined || Number(length) >= MIN_COMPRESS_BYTES;
}

const addVary = (head: ResponseHead) => {
  const vary = head.headers.vary;
  const list = vary === undefined ? [] : String(vary).split(',').map((v) => v.trim()).filter(Boolean);
  if (!list.some((v) => v.toLowerCase() === 'accept-encoding' || v === '*')) head.headers.vary = [...list, 'Accept-Encoding'].join(', ');
};

/**
 * The compressor of a response worth compressing, its head changed to say so (content-encoding,
 * vary, a weak etag); undefined, head left but for vary, otherwise. The route module and the
 * traffic policy's compress-response action both compress through this.
 */
export function compressBody(head: ResponseHead, method: string, encoding: 'br' | 'gzip' | 'deflate' | undefined): Transform | undefined {
  if (!worthCompressing(head, method)) return undefined;
  addVary(head);
  if (!encoding) return undefined;
  head.headers['content-encoding'] = encoding;
  delete head.headers['content-length'];
  if (head.headers.etag !== undefined && !String(head.headers.etag).startsWith('W/')) head.headers.etag = `W/${head.headers.etag}`;
  if (encoding === 'br') return zlib.createBrotliCompress({ flush: zlib.constants.BROTLI_OPERATION_FLUSH, params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 4 } });
  return encoding === 'gzip' ? zlib.createGzip({ flush: zlib.constants.Z_SYNC_FLUSH }) : zlib.createDeflate({ flush: zlib.constants.Z_SYNC_FLUSH });
}

export const compression: FilterFactory = () => ({
  handle(ex, next) {
    const accept = ex.req.headers['accept-encoding'];
    const encoding = chooseEncoding(Array.isArray(accept) ? accept.join(',') : accept);
    ex.onResponseBody((head) => compressBody(head, ex.method, encoding));
    return next();
  },
});
