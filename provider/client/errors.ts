// A failed API call, carrying what the server said (error code, message, operation id).

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

  /** Whether trying again may succeed (and is safe for the method). */
  retryable(): boolean {
    if (this.status === 429) return true;
    return this.status >= 500 && this.method !== 'POST';
  }
}
