// The request body: JSON text to a value the rest of the server can walk safely. JSON.parse
// itself does not recurse, but zod, the catalog walks and JSON.stringify do, and PostgreSQL
// cannot store every string JSON can carry; jsonValueProblem names what is out of bounds.
import { jsonValueProblem } from '../../provider/catalog/validate/bounded-parse.js';
import { pathText } from '../../provider/catalog/walk.js';
import { ApiError } from './errors.js';

const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)/i;

/** The parsed body (undefined for an empty one), or the 400 naming the field at fault. */
export function parseJsonBody(text: string, contentType = ''): unknown {
  // JSON is UTF-8 (RFC 8259); the body is read as UTF-8 whatever the header says, so another charset is refused, not misread.
  const charset = CHARSET.exec(contentType)?.[1].toLowerCase();
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    throw new ApiError('ERR_SERVICE_101', `the request body must be UTF-8 JSON; charset=${charset.slice(0, 40)} is not supported`);
  }
  if (text.trim() === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ApiError('ERR_SERVICE_100', 'the request body is not valid JSON');
  }
  const problem = jsonValueProblem(value);
  if (problem) {
    const field = pathText(problem.path);
    throw new ApiError('ERR_SERVICE_103', field ? `${field}: ${problem.message}` : `the request body ${problem.message}`, field ? { field } : {});
  }
  return value;
}
