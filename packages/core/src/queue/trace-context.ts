/**
 * Traces through `@opentelemetry/api`, an optional peer dependency: the API loaded once, the enqueue span
 * (producer), and the `trace_context` column (migrate --with tracing) that carries the enqueuer's W3C trace
 * context to the worker, written here and read back by the worker's spans (worker/tracing.ts: claim, run, settle).
 * Both follow OpenTelemetry's messaging conventions. Split in two by core's rooms: queue/ may not import worker/.
 *
 * The API is imported once, at Queue.open; without the package every hook is skipped, and with it but without
 * an SDK the API's no-op tracer records nothing and no context is written. docs/features/tracing.md.
 */
import type * as Otel from '@opentelemetry/api';
import type { Attributes, Span, SpanContext } from '@opentelemetry/api';
import { columnOverflow } from '../protocol/columns.js';
import type { ResolvedTable } from '../protocol/table.js';

export type OtelApi = typeof Otel;
type Api = OtelApi;

/** The API once loaded; null before, and for good when the package is not installed. */
let api: Api | null = null;
let loading: Promise<Api | null> | undefined;

/**
 * Imports `@opentelemetry/api` once per process. A missing package (or one that fails to load) means no tracing,
 * never an error: the application chose not to trace.
 */
export function loadTracing(): Promise<Api | null> {
  loading ??= import('@opentelemetry/api').then(
    (module) => (api = module),
    () => null,
  );
  return loading;
}

export const TRACER_NAME = '@statusq/core';
const SYSTEM = 'statusq';

/** The attributes every statusq span has, after the messaging conventions (messaging.operation.type: send, receive, process, settle). */
export function baseAttributes(table: ResolvedTable, type: 'send' | 'receive' | 'process' | 'settle', name: string): Attributes {
  return { 'messaging.system': SYSTEM, 'messaging.operation.type': type, 'messaging.operation.name': name, 'messaging.destination.name': table.table };
}



export function failSpan(span: Span, error: unknown): void {
  const otel = api!;
  if (error instanceof Error) span.recordException(error);
  span.setStatus({ code: otel.SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
}

/**
 * Runs an enqueue of `count` rows inside its producer span, so the rows' trace_context (traceContextValue, read
 * while building them) names this span. `idsOf` gives the inserted ids, one of which becomes the message id.
 */
export function inEnqueueSpan<T>(table: ResolvedTable, count: number, idsOf: (result: T) => readonly unknown[], enqueue: () => Promise<T>): Promise<T> {
  const otel = api;
  if (otel === null) return enqueue();
  const attributes = baseAttributes(table, 'send', 'enqueue');
  if (count !== 1) attributes['messaging.batch.message_count'] = count;
  const span = otel.trace.getTracer(TRACER_NAME).startSpan(`enqueue ${table.table}`, { kind: otel.SpanKind.PRODUCER, attributes });
  return otel.context.with(otel.trace.setSpan(otel.context.active(), span), enqueue).then(
    (result) => {
      const ids = idsOf(result);
      if (ids.length === 1 && ids[0] !== null && ids[0] !== undefined) span.setAttribute('messaging.message.id', String(ids[0] as string));
      span.end();
      return result;
    },
    (error: unknown) => {
      failSpan(span, error);
      span.end();
      throw error;
    },
  );
}

/**
 * The trace_context value a row enqueued now carries: the active span's W3C traceparent, then a space and its
 * tracestate when it has one; null without the column or a valid active span. Written in the W3C form whatever
 * propagator the application configured, so any worker can read it. A tracestate the column cannot hold is left out.
 */
export function traceContextValue(table: ResolvedTable): string | null {
  const otel = api;
  if (otel === null || table.columns.traceContext === undefined) return null;
  const spanContext = otel.trace.getSpanContext(otel.context.active());
  if (!spanContext || !otel.isSpanContextValid(spanContext)) return null;
  const traceparent = `00-${spanContext.traceId}-${spanContext.spanId}-${(spanContext.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
  const tracestate = spanContext.traceState?.serialize() ?? '';
  if (tracestate === '') return traceparent;
  const value = `${traceparent} ${tracestate}`;
  return columnOverflow(value, table.limits.traceContext) === null ? value : traceparent;
}

/** version-traceid-parentid-flags, lower-case hex (W3C Trace Context, level 1). Version ff is invalid. */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/**
 * A row's trace_context read back: the remote span context it names, null when the row has none, or why the
 * value is not W3C trace context (the row still runs, in a trace of its own).
 */
export function parseTraceContext(value: unknown): { context: SpanContext } | { invalid: string } | null {
  if (value === null || value === undefined || value === '') return null;
  if (typeof value !== 'string') return { invalid: `not text (${typeof value})` };
  const space = value.indexOf(' ');
  const traceparent = space === -1 ? value : value.slice(0, space);
  const match = TRACEPARENT.exec(traceparent);
  if (!match) return { invalid: 'not a W3C traceparent (version-traceid-parentid-flags)' };
  const [, version, traceId, spanId, flags, rest] = match as unknown as [string, string, string, string, string, string | undefined];
  if (version === 'ff') return { invalid: 'traceparent version ff' };
  // Version 00 has exactly four fields; a later version may add more, which a reader of 00 ignores.
  if (version === '00' && rest !== undefined) return { invalid: 'a version-00 traceparent with extra fields' };
  const otel = api!;
  if (!otel.isValidTraceId(traceId) || !otel.isValidSpanId(spanId)) return { invalid: 'an all-zero trace id or parent id' };
  const context: SpanContext = { traceId, spanId, traceFlags: Number.parseInt(flags, 16) & 0xff, isRemote: true };
  const tracestate = space === -1 ? '' : value.slice(space + 1).trim();
  if (tracestate !== '') context.traceState = otel.createTraceState(tracestate);
  return { context };
}

