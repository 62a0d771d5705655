// Numbers as people read them: grouped counts, rates with a sensible precision, bytes in
// binary units, durations and times.

const grouped = new Intl.NumberFormat('en', { maximumFractionDigits: 0 });
const oneDecimal = new Intl.NumberFormat('en', { maximumFractionDigits: 1 });
const twoDecimals = new Intl.NumberFormat('en', { maximumFractionDigits: 2 });

export function count(n) {
  if (n === undefined || n === null || Number.isNaN(n)) return '–';
  return grouped.format(n);
}

/** Per-second rates: 0, 0.25, 3.5, 1,234. */
export function rate(r) {
  if (r === undefined || r === null || Number.isNaN(r)) return '–';
  if (r === 0) return '0/s';
  const abs = Math.abs(r);
  const f = abs < 1 ? twoDecimals : abs < 100 ? oneDecimal : grouped;
  return `${f.format(r)}/s`;
}

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

export function bytes(n) {
  if (n === undefined || n === null || Number.isNaN(n)) return '–';
  let i = 0;
  let v = n;
  while (Math.abs(v) >= 1024 && i < UNITS.length - 1) {
    v /= 1024;
    i += 1;
  }
  return i === 0 ? `${grouped.format(v)} B` : `${oneDecimal.format(v)} ${UNITS[i]}`;
}

export function byteRate(r) {
  if (r === undefined || r === null) return '–';
  return `${bytes(r)}/s`;
}

/** A compact number for chart axes: 950, 1.2k, 3M. */
export function short(n) {
  const abs = Math.abs(n);
  if (abs >= 1e9) return `${oneDecimal.format(n / 1e9)}G`;
  if (abs >= 1e6) return `${oneDecimal.format(n / 1e6)}M`;
  if (abs >= 1e4) return `${oneDecimal.format(n / 1e3)}k`;
  return abs < 10 ? twoDecimals.format(n) : grouped.format(n);
}

export function duration(ms) {
  if (ms === undefined || ms === null) return '–';
  let s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400);
  s -= d * 86400;
  const hr = Math.floor(s / 3600);
  s -= hr * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  if (d) return `${d}d ${hr}h`;
  if (hr) return `${hr}h ${m}m`;
  if (m) return `${m}m ${s}s`;
  return `${s}s`;
}

const clock = new Intl.DateTimeFormat('en-GB', { hour: '2-digit', minute: '2-digit', second: '2-digit' });
const clockShort = new Intl.DateTimeFormat('en-GB', { hour: '2-digit', minute: '2-digit' });
const dateTime = new Intl.DateTimeFormat('en-GB', {
  year: 'numeric', month: 'short', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
});

export function time(ms, seconds = true) {
  return (seconds ? clock : clockShort).format(new Date(ms));
}

export function when(ms) {
  if (!ms) return '–';
  return dateTime.format(new Date(ms));
}

export function yesNo(b) {
  return b ? 'yes' : 'no';
}
