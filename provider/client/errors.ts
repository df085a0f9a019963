// A failed API call, carrying what the server said (error code, message, operation id).

/** The server's error code for a path it has no route for. */
export const NO_SUCH_PATH = 'ERR_SERVICE_301';

export class ApiClientError extends Error {
  constructor(
    readonly method: string,
    readonly path: string,
    readonly status: number,
    readonly code: string | undefined,
    readonly serverMessage: string,
    readonly operationId: string | undefined,
    readonly details: Record<string, unknown> = {},
  ) {
    super(`${method} ${path}: ${status}${code ? ` ${code}` : ''}: ${serverMessage}${operationId ? ` (operation ${operationId})` : ''}`);
  }

  /**
   * Whether the server says the resource does not exist. Its "no such path" 404 (an API URL
   * with a path of its own, ".../v1") and a 404 from something that is not an edgeform
   * server (no error code) say nothing about the resource: read as "gone", a refresh
   * dropped everything from the state and a destroy left it all on the server.
   */
  notFound(): boolean {
    return this.status === 404 && this.code !== undefined && this.code !== NO_SUCH_PATH;
  }

  /** Whether trying again may succeed (and is safe for the method). */
  retryable(): boolean {
    if (this.status === 429) return true;
    return this.status >= 500 && this.method !== 'POST';
  }
}
