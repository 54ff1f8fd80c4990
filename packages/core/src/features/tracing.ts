/**
 * Traces through `@opentelemetry/api`, an optional peer dependency: spans for enqueue (producer), each claim
 * that took rows, each job's run (consumer) and each job's settle, named and tagged after OpenTelemetry's
 * messaging conventions. A table with a `trace_context` column (migrate --with tracing) carries the enqueuer's
 * W3C trace context to the worker, so the run span continues the trace of the request that enqueued the row.
 *
 * The API is imported once, at Queue.open; without the package every hook here is skipped, and with it but
 * without an SDK the API's no-op tracer records nothing and no context is written. docs/features/tracing.md.
 */
import type * as OtelApi from '@opentelemetry/api';
import type { Attributes, Link, Span, SpanContext, Tracer } from '@opentelemetry/api';
import { columnOverflow } from '../protocol/columns.js';
import type { ResolvedTable } from '../protocol/table.js';
import type { Row } from '../store/store.js';
import type { Job } from '../worker/handler.js';
import type { InFlight, Outcome } from '../worker/job-run.js';
import type { ClaimSource, ClaimedBatch } from '../worker/seams.js';

type Api = typeof OtelApi;

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

const TRACER_NAME = '@statusq/core';
const SYSTEM = 'statusq';

/** The attributes every statusq span has, after the messaging conventions (messaging.operation.type: send, receive, process, settle). */
function baseAttributes(table: ResolvedTable, type: 'send' | 'receive' | 'process' | 'settle', name: string): Attributes {
  return { 'messaging.system': SYSTEM, 'messaging.operation.type': type, 'messaging.operation.name': name, 'messaging.destination.name': table.table };
}

function jobAttributes(job: Job): Attributes {
  const attributes: Attributes = { 'messaging.message.id': String(job.id), 'statusq.job.attempt': job.attempt };
  if (job.kind !== null) attributes['statusq.job.kind'] = job.kind;
  return attributes;
}

/** An outcome as the spans name it: the status it writes (done, abuse, failed) or a retry. */
function outcomeName(outcome: Outcome): string {
  return outcome.kind === 'complete' ? 'done' : outcome.kind === 'giveUp' ? 'failed' : outcome.kind;
}

function failSpan(span: Span, error: unknown): void {
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

/** What a worker's tracing tells it: a row whose trace_context was ignored (the CLI logs it at debug). */
export interface TracingHooks {
  ignored(job: Job, reason: string): void;
}

/** The spans of one job in flight: its run, and its settle once submitted. */
interface FlightSpans {
  run: Span;
  settle: Span | null;
  /** The settle committed and changed nothing: the claim had been lost (a lease taken over, a cancel). */
  lost: boolean;
}

/**
 * A worker's spans: one per claim that took rows, and per job a run span (parent: the enqueuer's context from
 * trace_context; links: that context and the claim) with its settle span inside. flights.ts calls the hooks.
 */
export class WorkerTracing {
  private readonly tracer: Tracer;
  /** The claim span of each claimed row, for its run span's link; rows are the jobs' own objects (job.row). */
  private readonly claimOf = new WeakMap<Row, SpanContext>();
  private readonly spans = new WeakMap<InFlight, FlightSpans>();

  private constructor(
    private readonly otel: Api,
    private readonly table: ResolvedTable,
    private readonly workerId: string,
    private readonly hooks: TracingHooks,
  ) {
    this.tracer = otel.trace.getTracer(TRACER_NAME);
  }

  /** The worker's tracing, or null when `@opentelemetry/api` is not installed. */
  static async open(table: ResolvedTable, workerId: string, hooks: TracingHooks): Promise<WorkerTracing | null> {
    const otel = await loadTracing();
    return otel === null ? null : new WorkerTracing(otel, table, workerId, hooks);
  }

  /**
   * `source` with a span per claim that took rows or failed. Empty claims make none: an idle worker polls, and a
   * span per poll would bury the traces that matter. The span is made after the claim, with its start time.
   */
  claims(source: ClaimSource): ClaimSource {
    const claimed = (startTime: number, batch: ClaimedBatch | null, error?: unknown) => this.claimed(startTime, batch, error);
    return {
      start: () => source.start(),
      async claim(limit) {
        const startTime = performance.timeOrigin + performance.now();
        let batch: ClaimedBatch | null;
        try {
          batch = await source.claim(limit);
        } catch (error) {
          claimed(startTime, null, error);
          throw error;
        }
        if (batch !== null && (batch.rows.length > 0 || batch.interruptedBy !== undefined)) claimed(startTime, batch, batch.interruptedBy);
        return batch;
      },
      finished: (id) => source.finished(id),
      arrival: () => source.arrival(),
      stop: () => source.stop(),
    };
  }

  private claimed(startTime: number, batch: ClaimedBatch | null, error: unknown): void {
    const attributes = baseAttributes(this.table, 'receive', 'claim');
    attributes['messaging.batch.message_count'] = batch?.rows.length ?? 0;
    attributes['statusq.worker.id'] = this.workerId;
    const span = this.tracer.startSpan(`claim ${this.table.table}`, { kind: this.otel.SpanKind.CLIENT, attributes, startTime, root: true });
    if (error !== undefined) failSpan(span, error);
    // Asked before end(): an ended span no longer records.
    const linkable = batch !== null && span.isRecording();
    span.end();
    if (!linkable) return;
    const context = span.spanContext();
    for (const row of batch.rows) this.claimOf.set(row, context);
  }

  /**
   * Runs `decide` (the job's user code) inside its run span, so spans the handler makes are its children. The
   * parent is the enqueuer's context when the row has one, else none (a trace of its own, not the worker's
   * caller's); the links are that context, as the messaging conventions ask, and the claim.
   */
  run<T>(flight: InFlight, decide: () => T): T {
    const { otel } = this;
    const { job } = flight;
    const column = this.table.columns.traceContext;
    const parsed = column === undefined ? null : parseTraceContext(job.row[column]);
    let parent = otel.ROOT_CONTEXT;
    const links: Link[] = [];
    if (parsed !== null && 'invalid' in parsed) this.hooks.ignored(job, parsed.invalid);
    else if (parsed !== null) {
      parent = otel.trace.setSpanContext(parent, parsed.context);
      links.push({ context: parsed.context, attributes: { 'statusq.link': 'enqueue' } });
    }
    const claim = this.claimOf.get(job.row);
    if (claim !== undefined) links.push({ context: claim, attributes: { 'statusq.link': 'claim' } });
    const attributes = { ...baseAttributes(this.table, 'process', 'run'), ...jobAttributes(job) };
    const span = this.tracer.startSpan(`run ${this.table.table}`, { kind: otel.SpanKind.CONSUMER, attributes, links }, parent);
    if (!span.isRecording()) return parent === otel.ROOT_CONTEXT ? decide() : otel.context.with(otel.trace.setSpan(parent, span), decide);
    this.spans.set(flight, { run: span, settle: null, lost: false });
    return otel.context.with(otel.trace.setSpan(parent, span), decide);
  }

  /** The job's outcome is decided and its settle submitted: the settle span starts, inside the run span. */
  settling(flight: InFlight): void {
    const spans = this.spans.get(flight);
    if (spans === undefined || flight.outcome === null) return;
    const attributes = { ...baseAttributes(this.table, 'settle', 'settle'), ...jobAttributes(flight.job), 'statusq.job.outcome': outcomeName(flight.outcome) };
    spans.settle = this.tracer.startSpan(`settle ${this.table.table}`, { kind: this.otel.SpanKind.CLIENT, attributes }, this.otel.trace.setSpan(this.otel.ROOT_CONTEXT, spans.run));
  }

  /** The settle committed; `applied` false: the claim was lost and the outcome changed nothing. */
  settled(flight: InFlight, applied: boolean): void {
    const spans = this.spans.get(flight);
    if (spans?.settle == null) return;
    spans.settle.setAttribute('statusq.settle.applied', applied);
    spans.lost = !applied;
  }

  /** The settle did not commit (it may be submitted again with another outcome: finished ends the span). */
  settleFailed(flight: InFlight, error: unknown): void {
    const settle = this.spans.get(flight)?.settle;
    if (settle) failSpan(settle, error);
  }

  /** The job's slot is free: its spans end, the run span with the outcome that stands. */
  finished(flight: InFlight): void {
    const spans = this.spans.get(flight);
    if (spans === undefined) return;
    this.spans.delete(flight);
    const { run, settle } = spans;
    const { outcome } = flight;
    if (settle !== null) {
      if (outcome !== null) settle.setAttribute('statusq.job.outcome', outcomeName(outcome));
      settle.end();
    }
    // Lost (at a heartbeat or at the settle) or handed back: the outcome the handler chose is not what the row became.
    const ended = spans.lost || flight.state === 'lost' ? 'claim-lost' : flight.state === 'handedBack' ? 'handed-back' : outcome === null ? null : outcomeName(outcome);
    if (ended !== null) run.setAttribute('statusq.job.outcome', ended);
    if (outcome !== null && (outcome.kind === 'giveUp' || outcome.kind === 'retry')) {
      if (outcome.cause instanceof Error) run.recordException(outcome.cause);
      run.setStatus({ code: this.otel.SpanStatusCode.ERROR, message: outcome.reason });
    }
    run.end();
  }
}
