// The one way an unknown thrown value becomes text for a log line or a wrapping message.

/** An Error's message, or the thrown value as a string (a library may throw anything). */
export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** The thrown value as an Error, for callbacks typed to take one. */
export function asError(e: unknown): Error {
  return e instanceof Error ? e : new Error(String(e));
}
