// Run by a netns agent: HTTP requests from inside a namespace (the daemon's healthz and
// metrics listen there, out of the test process's reach).

export async function httpGet(url: string, timeoutMs = 2000): Promise<{ status: number; type: string; body: string }> {
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  return { status: res.status, type: res.headers.get('content-type') ?? '', body: await res.text() };
}
