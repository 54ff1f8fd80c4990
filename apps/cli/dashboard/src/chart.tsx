// Throughput over time: jobs/s and failures/s from the server's count samples, drawn by uPlot.
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { Rates } from './format.ts';

const HEIGHT = 220;
/** Steps between x-axis ticks, in seconds (the axis unit): never less than one, up to the 10 minutes kept. */
const TICK_SECONDS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600];
const clockTime = (seconds: number) => new Date(seconds * 1000).toLocaleTimeString('en-GB', { hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' });

function options(width: number): uPlot.Options {
  return {
    width,
    height: HEIGHT,
    // uPlot's canvas has no text of its own: the legend below it, which uPlot renders as a table, names the series.
    series: [
      {},
      { label: 'jobs/s', stroke: '#2563eb', fill: 'rgba(37, 99, 235, 0.12)', width: 2, value: (_u, v) => (v === null ? '-' : v.toFixed(2)) },
      { label: 'failed + abuse/s', stroke: '#dc2626', width: 1.5, value: (_u, v) => (v === null ? '-' : v.toFixed(2)) },
    ],
    // Clock times on whole seconds: uPlot's own ticks show milliseconds while the window spans only seconds.
    axes: [{ space: 70, incrs: TICK_SECONDS, values: (_u, ticks) => ticks.map(clockTime) }, { label: 'per second', size: 56 }],
    scales: { y: { range: (_u, _min, max) => [0, Math.max(1, max * 1.1)] } },
    cursor: { drag: { x: false, y: false } },
  };
}

export function ThroughputChart({ rates }: { rates: Rates }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);

  useEffect(() => {
    const element = box.current!;
    const chart = new uPlot(options(Math.max(200, element.clientWidth)), [[], [], []], element);
    plot.current = chart;
    // The chart follows its box, so a narrow window gets a narrow chart instead of a scroll bar.
    const resize = new ResizeObserver(() => chart.setSize({ width: Math.max(200, element.clientWidth), height: HEIGHT }));
    resize.observe(element);
    return () => {
      resize.disconnect();
      chart.destroy();
      plot.current = null;
    };
  }, []);

  useEffect(() => {
    plot.current?.setData([rates.t, rates.jobs, rates.failures]);
  }, [rates]);

  return <div ref={box} class="chart" role="img" aria-label="Jobs settled per second over the last minutes" data-testid="throughput-chart" />;
}
