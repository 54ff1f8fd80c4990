/** The report's chart: jobs/s of each system by worker count, as an SVG for docs/benchmarks.md. */
import type { BenchRecord, BurnDownRecord } from './records.js';
import { systemLabel } from './report-format.js';

const PALETTE = ['#1b9e77', '#66a61e', '#a6d854', '#d95f02', '#fc8d62', '#7570b3', '#8da0cb', '#e7298a', '#e6ab02', '#666666'];

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** Grouped bars: one group per worker count, one bar per system (in-process workers, no-op handler). */
export function throughputSvg(records: readonly BenchRecord[], caption: string): string {
  const burn = records.filter((r): r is BurnDownRecord => r.scenario === 'burn-down' && r.processes === 1);
  const series = [...new Set(burn.map(systemLabel))];
  const groups = [...new Set(burn.map((r) => r.workers))].sort((a, b) => a - b);
  const max = Math.max(1, ...burn.map((r) => r.jobsPerSec));
  const step = 10 ** Math.floor(Math.log10(max));
  const top = Math.ceil(max / step) * step;
  const bar = 14;
  const gap = 28;
  const left = 70;
  const plotTop = 40;
  const plotHeight = 300;
  const groupWidth = series.length * bar + gap;
  const legendTop = plotTop + plotHeight + 50;
  const width = Math.max(left + groups.length * groupWidth + 20, 640);
  const height = legendTop + series.length * 18 + 20;
  const y = (v: number) => Math.round((plotTop + plotHeight - (v / top) * plotHeight) * 10) / 10;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${left}" y="20" font-size="13" font-weight="bold">${escapeXml(caption)}</text>`,
  ];
  for (let v = 0; v <= top; v += step) {
    out.push(`<line x1="${left}" x2="${width - 10}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/>`);
    out.push(`<text x="${left - 6}" y="${y(v) + 4}" text-anchor="end">${v.toLocaleString('en-US')}</text>`);
  }
  out.push(`<text x="14" y="${plotTop + plotHeight / 2}" transform="rotate(-90 14 ${plotTop + plotHeight / 2})" text-anchor="middle">jobs/s</text>`);
  groups.forEach((workers, g) => {
    const x0 = left + gap / 2 + g * groupWidth;
    series.forEach((name, s) => {
      const r = burn.find((b) => b.workers === workers && systemLabel(b) === name);
      if (!r) return;
      const x = x0 + s * bar;
      out.push(`<rect x="${x}" y="${y(r.jobsPerSec)}" width="${bar - 2}" height="${Math.round((plotTop + plotHeight - y(r.jobsPerSec)) * 10) / 10}" fill="${PALETTE[s % PALETTE.length]}"><title>${escapeXml(`${name}, ${workers} workers: ${r.jobsPerSec} jobs/s`)}</title></rect>`);
    });
    out.push(`<text x="${x0 + (series.length * bar) / 2}" y="${plotTop + plotHeight + 18}" text-anchor="middle">${workers} worker${workers === 1 ? '' : 's'}</text>`);
  });
  series.forEach((name, s) => {
    const ly = legendTop + s * 18;
    out.push(`<rect x="${left}" y="${ly - 10}" width="12" height="12" fill="${PALETTE[s % PALETTE.length]}"/>`);
    out.push(`<text x="${left + 18}" y="${ly}">${escapeXml(name)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}
