// Time-series line charts in SVG: a fixed time window ending now, a y axis from zero with
// round ticks, time labels, a legend with the latest values, and a hover read-out.
// Small enough (a few hundred points per chart) that redrawing everything each refresh
// costs well under a millisecond; no library needed.

import { h, s, fill } from './dom.js';
import { short, time } from './format.js';

const MARGIN = { top: 12, right: 14, bottom: 24, left: 52 };

/**
 * Round tick spacing (1, 2, 2.5 or 5 × 10^n) giving about `count` ticks up to `max`;
 * whole steps only for `integer` series (message counts: no "0.25 messages").
 */
export function niceTicks(max, count = 4, integer = false) {
  if (!(max > 0)) max = integer ? count : 1;
  const raw = max / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const steps = [1, 2, 2.5, 5, 10].map((m) => m * mag).filter((st) => !integer || Number.isInteger(st));
  const step = steps.find((st) => st >= raw) || (integer ? Math.max(1, Math.ceil(raw)) : raw);
  const top = Math.ceil(max / step) * step;
  const ticks = [];
  for (let v = 0; v <= top + step / 2; v += step) ticks.push(v);
  return { top, ticks };
}

const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600].map((x) => x * 1000);

function timeTicks(from, to, maxTicks) {
  const span = to - from;
  const step = TIME_STEPS.find((st) => span / st <= maxTicks) || 3600_000;
  const ticks = [];
  for (let t = Math.ceil(from / step) * step; t <= to; t += step) ticks.push(t);
  return { step, ticks };
}

export class Chart {
  /**
   * title: shown above; series: [{key, label, color, dash?}]; format: value → text (legend
   * and read-out); axis: value → short text; integer: whole-number ticks; height in pixels.
   */
  constructor({ title, series, format, axis = short, height = 200, integer = false }) {
    this.series = series;
    this.integer = integer;
    this.format = format;
    this.axis = axis;
    this.height = height;
    this.data = {};
    this.window = 600_000;
    this.now = Date.now();
    this.legend = h('ul', { class: 'legend' });
    this.plot = h('div', { class: 'plot' });
    this.tip = h('div', { class: 'tip', hidden: true });
    this.title = title;
    this.el = h(
      'figure',
      { class: 'chart' },
      h('figcaption', null, title),
      this.legend,
      h('div', { class: 'plot-wrap' }, this.plot, this.tip),
    );
    this.pending = false;
    // Redraw at the new width when the layout changes (a narrow window, a sidebar...).
    this.resize = new ResizeObserver(() => this.redrawSoon());
    this.resize.observe(this.plot);
  }

  /** data: {key: [[timestamp ms, value], ...] oldest first}; windowMs ends at `now`. */
  update(data, windowMs, now = Date.now()) {
    this.data = data;
    this.window = windowMs;
    this.now = now;
    this.draw();
  }

  redrawSoon() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.draw();
    });
  }

  destroy() {
    this.resize.disconnect();
  }

  latest(key) {
    const points = this.data[key] || [];
    return points.length ? points[points.length - 1][1] : undefined;
  }

  draw() {
    const width = Math.max(this.plot.clientWidth, 240);
    const height = this.height;
    const from = this.now - this.window;
    const to = this.now;
    const inner = { w: width - MARGIN.left - MARGIN.right, h: height - MARGIN.top - MARGIN.bottom };
    let max = 0;
    let any = false;
    for (const { key } of this.series) {
      for (const [t, v] of this.data[key] || []) {
        if (t >= from) {
          any = true;
          if (v > max) max = v;
        }
      }
    }
    const { top, ticks } = niceTicks(max, 4, this.integer);
    const x = (t) => MARGIN.left + ((t - from) / (to - from)) * inner.w;
    const y = (v) => MARGIN.top + inner.h - (v / top) * inner.h;

    const grid = ticks.map((v) =>
      s(
        'g',
        { class: 'tick' },
        s('line', { x1: MARGIN.left, x2: width - MARGIN.right, y1: y(v), y2: y(v) }),
        s('text', { x: MARGIN.left - 6, y: y(v), dy: '0.32em', 'text-anchor': 'end' }, this.axis(v)),
      ),
    );
    const times = timeTicks(from, to, Math.max(2, Math.floor(inner.w / 90)));
    const xlabels = times.ticks.map((t) =>
      s(
        'text',
        { class: 'xtick', x: x(t), y: height - 6, 'text-anchor': 'middle' },
        time(t, times.step < 60_000),
      ),
    );
    const lines = this.series.map(({ key, color, dash }) => {
      const points = (this.data[key] || []).filter(([t]) => t >= from - 60_000);
      if (!points.length) return null;
      const d = points.map(([t, v], i) => `${i ? 'L' : 'M'}${x(Math.max(t, from)).toFixed(1)},${y(v).toFixed(1)}`);
      const [lt, lv] = points[points.length - 1];
      return s(
        'g',
        { class: 'series' },
        s('path', { d: d.join(''), stroke: color, fill: 'none', 'stroke-width': 2, 'stroke-linejoin': 'round', 'stroke-dasharray': dash }),
        s('circle', { cx: x(lt), cy: y(lv), r: 3, fill: color }),
      );
    });
    const empty = any
      ? null
      : s('text', { class: 'empty', x: MARGIN.left + inner.w / 2, y: MARGIN.top + inner.h / 2, 'text-anchor': 'middle' },
        'Waiting for samples…');
    const cursor = s('line', { class: 'cursor', y1: MARGIN.top, y2: MARGIN.top + inner.h, visibility: 'hidden' });
    const overlay = s('rect', {
      class: 'overlay', x: MARGIN.left, y: MARGIN.top, width: inner.w, height: inner.h, fill: 'transparent',
    });
    const summary = this.series.map(({ key, label }) => `${label} ${this.format(this.latest(key))}`).join(', ');
    const svg = s(
      'svg',
      { width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': `${this.title}: ${summary}` },
      s('g', { class: 'grid' }, grid),
      s('line', { class: 'axis', x1: MARGIN.left, x2: width - MARGIN.right, y1: y(0), y2: y(0) }),
      xlabels,
      lines,
      empty,
      cursor,
      overlay,
    );
    overlay.addEventListener('pointermove', (ev) => this.hover(ev, svg, cursor, x, from, to));
    overlay.addEventListener('pointerleave', () => {
      cursor.setAttribute('visibility', 'hidden');
      this.tip.hidden = true;
    });
    fill(this.plot, svg);
    fill(
      this.legend,
      this.series.map(({ key, label, color, dash }) => {
        const swatch = h('span', { class: ['swatch', dash && 'dashed'], 'aria-hidden': 'true' });
        swatch.style.background = color;
        return h('li', null, swatch, h('span', { class: 'label' }, label), h('span', { class: 'value' }, this.format(this.latest(key))));
      }),
    );
  }

  hover(ev, svg, cursor, x, from, to) {
    const box = svg.getBoundingClientRect();
    const px = ev.clientX - box.left;
    const t = from + ((px - MARGIN.left) / (box.width - MARGIN.left - MARGIN.right)) * (to - from);
    // The nearest sample of any series, then each series' value at or before it.
    let best = null;
    for (const { key } of this.series) {
      for (const [pt] of this.data[key] || []) {
        if (pt >= from && (best === null || Math.abs(pt - t) < Math.abs(best - t))) best = pt;
      }
    }
    if (best === null) return;
    cursor.setAttribute('x1', x(best));
    cursor.setAttribute('x2', x(best));
    cursor.setAttribute('visibility', 'visible');
    const rows = this.series.map(({ key, label, color }) => {
      const at = (this.data[key] || []).filter(([pt]) => pt <= best).pop();
      const swatch = h('span', { class: 'swatch', 'aria-hidden': 'true' });
      swatch.style.background = color;
      return h('div', null, swatch, `${label}: ${at ? this.format(at[1]) : '–'}`);
    });
    fill(this.tip, h('div', { class: 'tip-time' }, time(best)), rows);
    this.tip.hidden = false;
    const left = x(best) + 12;
    this.tip.style.left = `${Math.min(left, box.width - 170)}px`;
    this.tip.style.top = `${MARGIN.top}px`;
  }
}

/**
 * RabbitMQ's *_details.samples ({sample, timestamp}, newest first) as [[t, value]]
 * oldest first.
 */
export function points(details) {
  const samples = (details && details.samples) || [];
  return samples.map((p) => [p.timestamp, p.sample]).reverse();
}

/** Counter samples as per-second rates between neighbours. */
export function ratesOf(details) {
  const p = points(details);
  const out = [];
  for (let i = 1; i < p.length; i += 1) {
    const dt = (p[i][0] - p[i - 1][0]) / 1000;
    if (dt > 0) out.push([p[i][0], Math.max(0, (p[i][1] - p[i - 1][1]) / dt)]);
  }
  return out;
}

/**
 * History kept in the page while it is open, so a chart grows past the minute of
 * samples the broker keeps per object. Samples merge by timestamp; older than `keepMs`
 * go.
 */
export class History {
  constructor(keepMs) {
    this.keep = keepMs;
    this.series = new Map();
  }

  merge(key, pts) {
    let m = this.series.get(key);
    if (!m) {
      m = new Map();
      this.series.set(key, m);
    }
    for (const [t, v] of pts) m.set(t, v);
    const cutoff = Date.now() - this.keep;
    for (const t of m.keys()) if (t < cutoff) m.delete(t);
  }

  get(key) {
    const m = this.series.get(key);
    return m ? [...m.entries()].sort((a, b) => a[0] - b[0]) : [];
  }

  /** The oldest sample's time, or undefined. */
  oldest() {
    let t;
    for (const m of this.series.values()) for (const k of m.keys()) if (t === undefined || k < t) t = k;
    return t;
  }
}
