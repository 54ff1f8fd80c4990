/**
 * A worker's spans after OpenTelemetry's messaging conventions: one per claim that took rows (receive), and per
 * job a run span (process) with its settle span inside (settle). A row's trace_context (queue/trace-context.ts)
 * makes its run span the enqueue span's child. Created only when `@opentelemetry/api` is installed; flights.ts
 * calls the hooks. docs/features/tracing.md.
 */
import type { Attributes, Link, Span, SpanContext, Tracer } from '@opentelemetry/api';
import type { ResolvedTable } from '../protocol/table.js';
import type { Row } from '../store/store.js';
import { TRACER_NAME, baseAttributes, failSpan, loadTracing, parseTraceContext, type OtelApi } from '../queue/trace-context.js';
import type { Job } from './handler.js';
import type { InFlight, Outcome } from './job-run.js';
import type { ClaimSource, ClaimedBatch } from './seams.js';

type Api = OtelApi;

/** Set once a span records: built for every job, they cost more than the no-op span itself (measured, 2026-12-07). */
function jobAttributes(job: Job): Attributes {
  const attributes: Attributes = { 'messaging.message.id': String(job.id), 'statusq.job.attempt': job.attempt };
  if (job.kind !== null) attributes['statusq.job.kind'] = job.kind;
  return attributes;
}

/** An outcome as the spans name it: the status it writes (done, abuse, failed) or a retry. */
function outcomeName(outcome: Outcome): string {
  return outcome.kind === 'complete' ? 'done' : outcome.kind === 'giveUp' ? 'failed' : outcome.kind;
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
  /** What a sampler sees at a span's start, made once: the job's own attributes follow only on a recording span. */
  private readonly runAttributes: Attributes;
  private readonly settleAttributes: Attributes;

  private constructor(
    private readonly otel: Api,
    private readonly table: ResolvedTable,
    private readonly workerId: string,
    private readonly hooks: TracingHooks,
  ) {
    this.tracer = otel.trace.getTracer(TRACER_NAME);
    this.runAttributes = baseAttributes(table, 'process', 'run');
    this.settleAttributes = baseAttributes(table, 'settle', 'settle');
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
    let links: Link[] | undefined;
    if (parsed !== null && 'invalid' in parsed) this.hooks.ignored(job, parsed.invalid);
    else if (parsed !== null) {
      parent = otel.trace.setSpanContext(parent, parsed.context);
      links = [{ context: parsed.context, attributes: { 'statusq.link': 'enqueue' } }];
    }
    const claim = this.claimOf.get(job.row);
    if (claim !== undefined) (links ??= []).push({ context: claim, attributes: { 'statusq.link': 'claim' } });
    const span = this.tracer.startSpan(`run ${this.table.table}`, { kind: otel.SpanKind.CONSUMER, attributes: this.runAttributes, ...(links && { links }) }, parent);
    if (!span.isRecording()) return parent === otel.ROOT_CONTEXT ? decide() : otel.context.with(otel.trace.setSpan(parent, span), decide);
    span.setAttributes(jobAttributes(job));
    this.spans.set(flight, { run: span, settle: null, lost: false });
    return otel.context.with(otel.trace.setSpan(parent, span), decide);
  }

  /** The job's outcome is decided and its settle submitted: the settle span starts, inside the run span. */
  settling(flight: InFlight): void {
    const spans = this.spans.get(flight);
    if (spans === undefined || flight.outcome === null) return;
    const settle = this.tracer.startSpan(`settle ${this.table.table}`, { kind: this.otel.SpanKind.CLIENT, attributes: this.settleAttributes }, this.otel.trace.setSpan(this.otel.ROOT_CONTEXT, spans.run));
    settle.setAttributes(jobAttributes(flight.job));
    settle.setAttribute('statusq.job.outcome', outcomeName(flight.outcome));
    spans.settle = settle;
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
