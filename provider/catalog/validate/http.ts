// HTTP header names and values (RFC 9110 tokens; no control characters in values).
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

export const headerNameProblem = (name: string): string | undefined =>
  TOKEN.test(name) ? undefined : `"${name}" is not a valid HTTP header name`;

export const headerValueProblem = (value: string): string | undefined =>
  /[\0\r\n]/.test(value) ? 'header values may not contain NUL, CR or LF' : undefined;
