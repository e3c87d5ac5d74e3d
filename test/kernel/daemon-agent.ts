// Run by a netns agent: HTTP requests from inside a namespace (the daemon's healthz and
// metrics listen there, out of the test process's reach).

export async function httpGet(url: string, timeoutMs = 2000): Promise<{ status: number; type: string; body: string }> {
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  return { status: res.status, type: res.headers.get('content-type') ?? '', body: await res.text() };
}

/** Like httpGet, with the time to the whole answer (ms, measured here, next to the daemon). */
export async function timedGet(url: string, timeoutMs = 5000): Promise<{ status: number; ms: number }> {
  const start = performance.now();
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  await res.text();
  return { status: res.status, ms: Math.round(performance.now() - start) };
}
