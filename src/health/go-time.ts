// Upstream writes lastUpdated/currentTime with Go's %q of a time.Time, i.e. its String()
// form "2006-01-02 15:04:05.999999999 -0700 MST". We write the same form (in UTC, without
// Go's monotonic-clock suffix) so anything that parsed upstream's body parses ours.

const pad = (n: number, w = 2): string => String(n).padStart(w, '0');

export function formatGoTime(ms: number | undefined): string {
  if (ms === undefined) return '0001-01-01 00:00:00 +0000 UTC'; // Go's zero time
  const d = new Date(ms);
  const frac = d.getUTCMilliseconds() === 0 ? '' : `.${pad(d.getUTCMilliseconds(), 3).replace(/0+$/, '')}`;
  return (
    `${pad(d.getUTCFullYear(), 4)}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ` +
    `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}${frac} +0000 UTC`
  );
}
