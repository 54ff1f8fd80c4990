/** Tables and charts of the scale runs: markdown for docs/scale-out.md, SVG line charts, plain text for the console. */
import type { ScaleRecord } from './records.js';

export const DIALECT_NAMES: Record<ScaleRecord['dialect'], string> = { mysql: 'MariaDB', postgres: 'PostgreSQL' };

export function table(header: readonly string[], rows: ReadonlyArray<ReadonlyArray<string | number>>): string {
  const line = (cells: ReadonlyArray<string | number>) => `| ${cells.map(String).join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

export function proof(r: ScaleRecord): string {
  return r.ledger.violations.length === 0 ? `holds (${r.ledger.executions} runs of ${r.ledger.rows} rows)` : `FAILED: ${r.ledger.violations[0]}`;
}

function perThousand(count: number, jobs: number): string {
  return jobs > 0 ? (Math.round((count / jobs) * 10_000) / 10).toString() : '-';
}

export function hostsTable(records: readonly ScaleRecord[]): string {
  const rows = records
    .filter((r) => r.scenario === 'hosts')
    .map((r) => [DIALECT_NAMES[r.dialect], `${r.hosts} x ${r.processes} x ${r.concurrency}`, r.jobs, r.jobsPerSec.toLocaleString('en-US'), perThousand(r.candidatesLost, r.jobs), r.serverCores, r.ledger.reRuns, proof(r)]);
  return table(['database', 'hosts x processes x slots', 'jobs', 'jobs/s', 'candidates lost per 1,000 jobs', 'server CPU (cores)', 're-runs', 'ledger proof'], rows);
}

export function latencyTable(records: readonly ScaleRecord[]): string {
  const runs = records.filter((r) => r.scenario === 'latency');
  const batches = [...new Set(runs.map((r) => r.batch))].sort((a, b) => a - b);
  const keys = [...new Set(runs.map((r) => `${r.dialect}|${r.addedRttMs}`))];
  const rows = keys.map((key) => {
    const [dialect, rtt] = key.split('|') as [ScaleRecord['dialect'], string];
    const cells = batches.map((batch) => runs.find((r) => r.dialect === dialect && String(r.addedRttMs) === rtt && r.batch === batch)?.jobsPerSec.toLocaleString('en-US') ?? '-');
    return [DIALECT_NAMES[dialect], `+${rtt} ms`, ...cells];
  });
  const sample = runs[0];
  const shape = sample ? ` (${sample.hosts} host${sample.hosts > 1 ? 's' : ''} x ${sample.processes} process x ${sample.concurrency} slots)` : '';
  return table(['database', `added round trip${shape}`, ...batches.map((b) => `batch ${b}: jobs/s`)], rows);
}

export function faultsTable(records: readonly ScaleRecord[]): string {
  const rows = records
    .filter((r) => r.scenario === 'faults' && r.faults)
    .map((r) => {
      const f = r.faults!;
      return [DIALECT_NAMES[r.dialect], r.jobs, `${f.drops} (${f.dropped} connections)`, `${f.partitionedSeconds} s`, f.killed, Object.entries(f.claimsTakenOver).filter(([, n]) => n > 0).map(([host, n]) => `${host}: ${n}`).join(', ') || '0', `${r.ledger.reRuns} (${r.ledger.reRunsAfterDeath} killed, ${r.ledger.reRunsFenced} fenced)`, proof(r)];
    });
  return table(['database', 'jobs', 'w1: connection drops', 'w2: partitioned', 'w3: processes killed', 'late settles refused', 're-runs', 'ledger proof'], rows);
}

export interface Series {
  name: string;
  points: Array<[number, number]>;
}

/** A small line chart: one line per series, x and y from zero, the values labelled at each point. */
export function lineChartSvg(title: string, xLabel: string, yLabel: string, series: readonly Series[]): string {
  const width = 640;
  const height = 360;
  const pad = { left: 70, right: 150, top: 40, bottom: 50 };
  const xs = series.flatMap((s) => s.points.map((p) => p[0]));
  const ys = series.flatMap((s) => s.points.map((p) => p[1]));
  const xMax = Math.max(1, ...xs);
  const yMax = Math.max(1, ...ys) * 1.1;
  const x = (v: number) => pad.left + (v / xMax) * (width - pad.left - pad.right);
  const y = (v: number) => height - pad.bottom - (v / yMax) * (height - pad.top - pad.bottom);
  const colours = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b'];
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${width / 2}" y="20" text-anchor="middle" font-size="13">${escapeXml(title)}</text>`,
    `<line x1="${pad.left}" y1="${y(0)}" x2="${width - pad.right}" y2="${y(0)}" stroke="black"/>`,
    `<line x1="${pad.left}" y1="${y(0)}" x2="${pad.left}" y2="${pad.top}" stroke="black"/>`,
    `<text x="${(pad.left + width - pad.right) / 2}" y="${height - 12}" text-anchor="middle">${escapeXml(xLabel)}</text>`,
    `<text x="14" y="${(pad.top + height - pad.bottom) / 2}" text-anchor="middle" transform="rotate(-90 14 ${(pad.top + height - pad.bottom) / 2})">${escapeXml(yLabel)}</text>`,
  ];
  for (const tick of [...new Set(xs)].sort((a, b) => a - b)) out.push(`<text x="${x(tick)}" y="${y(0) + 16}" text-anchor="middle">${tick}</text>`);
  series.forEach((s, i) => {
    const colour = colours[i % colours.length]!;
    const points = [...s.points].sort((a, b) => a[0] - b[0]);
    out.push(`<polyline fill="none" stroke="${colour}" stroke-width="2" points="${points.map(([px, py]) => `${x(px).toFixed(1)},${y(py).toFixed(1)}`).join(' ')}"/>`);
    for (const [px, py] of points) {
      out.push(`<circle cx="${x(px).toFixed(1)}" cy="${y(py).toFixed(1)}" r="3" fill="${colour}"/>`);
      out.push(`<text x="${x(px).toFixed(1)}" y="${(y(py) - 6).toFixed(1)}" text-anchor="middle" fill="${colour}">${Math.round(py).toLocaleString('en-US')}</text>`);
    }
    out.push(`<rect x="${width - pad.right + 12}" y="${pad.top + i * 18}" width="10" height="10" fill="${colour}"/>`);
    out.push(`<text x="${width - pad.right + 26}" y="${pad.top + i * 18 + 9}">${escapeXml(s.name)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n');
}

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

export function hostsChart(records: readonly ScaleRecord[]): string {
  const runs = records.filter((r) => r.scenario === 'hosts');
  const series = (['mysql', 'postgres'] as const)
    .map((dialect) => ({ name: DIALECT_NAMES[dialect], points: runs.filter((r) => r.dialect === dialect).map((r): [number, number] => [r.hosts, r.jobsPerSec]) }))
    .filter((s) => s.points.length > 0);
  const sample = runs[0];
  return lineChartSvg(`jobs/s by worker hosts (each ${sample?.processes ?? '?'} processes x ${sample?.concurrency ?? '?'} slots), one database host`, 'worker hosts', 'jobs/s', series);
}

export function latencyChart(records: readonly ScaleRecord[]): string {
  const runs = records.filter((r) => r.scenario === 'latency');
  const series: Series[] = [];
  for (const dialect of ['mysql', 'postgres'] as const) {
    for (const batch of [...new Set(runs.map((r) => r.batch))].sort((a, b) => a - b)) {
      const points = runs.filter((r) => r.dialect === dialect && r.batch === batch).map((r): [number, number] => [r.addedRttMs, r.jobsPerSec]);
      if (points.length > 0) series.push({ name: `${DIALECT_NAMES[dialect]}, batch ${batch}`, points });
    }
  }
  return lineChartSvg('jobs/s by added round trip to the database, per claim batch size', 'added round trip (ms)', 'jobs/s', series);
}
