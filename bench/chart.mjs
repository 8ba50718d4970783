// The cost-versus-data-size chart of `npm run bench` as a small SVG, written by plain code from the run's figures:
// one panel per x quantity, CPU µs per operation on y (from 0), x on a log scale (the empty database at the left).

const W = 360;
const H = 240;
const M = { left: 56, right: 16, top: 28, bottom: 64 };
const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e'];

const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const fmt = (n) => (n >= 1e6 ? `${n / 1e6}M` : n >= 1e3 ? `${n / 1e3}k` : String(n));

/** A "nice" upper bound for the y axis and its tick step. */
function yScale(max) {
  const step = 10 ** Math.floor(Math.log10(max || 1));
  const nice = [1, 2, 2.5, 5, 10].map((m) => m * step).find((s) => max / s <= 5) ?? 10 * step;
  return { top: Math.ceil(max / nice) * nice || nice, step: nice };
}

function panel(x0, title, xLabel, series) {
  const xs = [...new Set(series.flatMap((s) => s.points.map(([x]) => x)))].sort((a, b) => a - b);
  const { top, step } = yScale(Math.max(...series.flatMap((s) => s.points.map(([, y]) => y))));
  const pw = W - M.left - M.right;
  const ph = H - M.top - M.bottom;
  // Log positions; 0 (the empty database) sits one decade left of the smallest positive x.
  const positive = xs.filter((x) => x > 0);
  const lo = Math.log10(Math.min(...positive)) - (xs[0] === 0 ? 1 : 0);
  const hi = Math.log10(Math.max(...positive));
  const px = (x) => x0 + M.left + (((x > 0 ? Math.log10(x) : lo) - lo) / (hi - lo || 1)) * pw;
  const py = (y) => M.top + ph - (y / top) * ph;
  const out = [`<text x="${x0 + M.left}" y="16" font-weight="bold">${esc(title)}</text>`];
  for (let y = 0; y <= top + 1e-9; y += step) {
    out.push(
      `<line x1="${x0 + M.left}" x2="${x0 + M.left + pw}" y1="${py(y)}" y2="${py(y)}" stroke="#ddd"/>`,
      `<text x="${x0 + M.left - 6}" y="${py(y) + 4}" text-anchor="end">${fmt(y)}</text>`,
    );
  }
  for (const x of xs) {
    out.push(`<text x="${px(x)}" y="${M.top + ph + 16}" text-anchor="middle">${fmt(x)}</text>`);
  }
  out.push(
    `<text x="${x0 + M.left + pw / 2}" y="${M.top + ph + 32}" text-anchor="middle">${esc(xLabel)}</text>`,
    `<text transform="translate(${x0 + 14} ${M.top + ph / 2}) rotate(-90)" text-anchor="middle">CPU µs per operation</text>`,
  );
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length];
    const d = s.points
      .map(([x, y], j) => `${j ? 'L' : 'M'}${px(x).toFixed(1)},${py(y).toFixed(1)}`)
      .join(' ');
    out.push(`<path d="${d}" fill="none" stroke="${color}" stroke-width="2"/>`);
    for (const [x, y] of s.points)
      out.push(`<circle cx="${px(x).toFixed(1)}" cy="${py(y).toFixed(1)}" r="3" fill="${color}"/>`);
    const ly = M.top + ph + 46 + i * 14;
    out.push(
      `<rect x="${x0 + M.left}" y="${ly - 8}" width="10" height="3" fill="${color}"/>`,
      `<text x="${x0 + M.left + 14}" y="${ly - 4}">${esc(s.name)}</text>`,
    );
  });
  return out.join('\n');
}

/** `series` from bench/growth.mjs: the rows-based ones in the left panel, the distinct-token one in the right. */
export function growthChart(series) {
  const byRows = series.filter((s) => !s.name.includes('distinct'));
  const byTokens = series.filter((s) => s.name.includes('distinct'));
  const height = H + 14 * Math.max(byRows.length, byTokens.length);
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${2 * W}" height="${height}" font-family="sans-serif" font-size="11">
<rect width="100%" height="100%" fill="#fff"/>
${panel(0, 'CPU µs per operation vs rows in the table', 'rows (refresh_tokens; audit_events)', byRows)}
${panel(W, 'GET /me vs distinct live session tokens', 'distinct tokens (cache holds 10k)', byTokens)}
</svg>
`;
}
