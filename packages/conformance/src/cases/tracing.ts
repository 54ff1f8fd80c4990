import { describe, expect, it } from 'vitest';
import { context, trace, SpanKind, SpanStatusCode, type SpanContext } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { Queue, initTable, migrateTable, type Job, type Store } from '@statusq/core';
import { FAST, readRow, statusOf, type TestEnv } from '../harness.js';
import { claimStateBeside } from '../tables.js';

/**
 * Registers an SDK with an in-memory exporter for the length of `body`, as an application with tracing would, and
 * unregisters it after: the other groups of the file run untraced, and their spans pile up nowhere.
 */
async function withTracing(body: (exporter: InMemorySpanExporter) => Promise<void>): Promise<void> {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  trace.setGlobalTracerProvider(provider);
  try {
    await body(exporter);
  } finally {
    trace.disable();
    context.disable();
    await provider.shutdown();
  }
}

/** The managed `jobs` table with trace_context (init --with tracing). */
async function tracedJobs(store: Store): Promise<Queue> {
  await initTable(store, 'jobs', { with: ['tracing'], ...(claimStateBeside() && { beside: true }) });
  return Queue.open(store, { table: 'jobs' });
}

const spanId = (span: ReadableSpan) => span.spanContext().spanId;
const traceId = (span: ReadableSpan) => span.spanContext().traceId;
const sameSpan = (a: SpanContext | undefined, b: SpanContext) => a?.traceId === b.traceId && a.spanId === b.spanId;
const named = (spans: readonly ReadableSpan[], name: string) => spans.filter((span) => span.name === name);
/** The run span of the job with this id. */
const runOf = (spans: readonly ReadableSpan[], id: string) => {
  const found = named(spans, 'run jobs').filter((span) => span.attributes['messaging.message.id'] === id);
  expect(found, `one run span of job ${id}`).toHaveLength(1);
  return found[0]!;
};

export function tracingCases(env: () => TestEnv): void {
  describe("tracing (spans through @opentelemetry/api; trace_context carries the enqueuer's trace)", () => {
    it("a job enqueued inside a request's span runs in its trace: enqueue (producer) -> run (consumer: parent and link) -> the handler's spans and the settle; the claim has a span with the batch", async () => {
      await withTracing(async (exporter) => {
        const store = await env().store();
        const queue = await tracedJobs(store);
        expect(queue.table.features.tracing).toBe(true);
        const tracer = trace.getTracer('conformance');
        const request = await tracer.startActiveSpan('request', async (span) => {
          const [id] = await queue.enqueue([{ traced: true }]);
          span.end();
          return { span, id: String(id) };
        });
        // Outside any span: the enqueue span is the root of a trace of its own, and the row carries it.
        const [untracedId] = (await queue.enqueue([{ traced: false }])).map(String);
        const row = await readRow(store, 'jobs', request.id);
        const requestTrace = request.span.spanContext().traceId;
        expect(row.trace_context).toMatch(new RegExp(`^00-${requestTrace}-[0-9a-f]{16}-01$`));
        expect((await readRow(store, 'jobs', untracedId)).trace_context).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
        expect((await readRow(store, 'jobs', untracedId)).trace_context).not.toContain(requestTrace);

        const w = await env().startWorker({
          store,
          table: { table: 'jobs' },
          ...FAST,
          batch: 2,
          exitWhenEmpty: true,
          handler: () => tracer.startActiveSpan('handler work', (span) => void span.end()),
        });
        await w.done;
        expect(w.errors).toEqual([]);
        for (const id of [request.id, untracedId]) expect(statusOf(await readRow(store, 'jobs', id))).toBe(queue.table.codes.done);

        const spans = exporter.getFinishedSpans();
        const enqueues = named(spans, 'enqueue jobs');
        expect(enqueues).toHaveLength(2);
        const enqueue = enqueues.find((span) => traceId(span) === requestTrace)!;
        expect(enqueue.kind).toBe(SpanKind.PRODUCER);
        expect(sameSpan(enqueue.parentSpanContext, request.span.spanContext())).toBe(true);
        expect(enqueue.attributes).toMatchObject({
          'messaging.system': 'statusq',
          'messaging.operation.type': 'send',
          'messaging.operation.name': 'enqueue',
          'messaging.destination.name': 'jobs',
          'messaging.message.id': request.id,
        });
        // The row carries the producer span's context, not the request's.
        expect(row.trace_context).toBe(`00-${requestTrace}-${spanId(enqueue)}-01`);

        const claims = named(spans, 'claim jobs');
        expect(claims.length).toBeGreaterThanOrEqual(1);
        for (const claim of claims) {
          expect(claim.kind).toBe(SpanKind.CLIENT);
          expect(claim.parentSpanContext).toBeUndefined();
          expect(claim.attributes).toMatchObject({ 'messaging.system': 'statusq', 'messaging.operation.type': 'receive', 'messaging.destination.name': 'jobs', 'statusq.worker.id': w.worker.workerId });
          expect(claim.attributes['messaging.batch.message_count']).toBeGreaterThanOrEqual(1);
        }
        expect(claims.reduce((sum, claim) => sum + Number(claim.attributes['messaging.batch.message_count']), 0)).toBe(2);

        const run = runOf(spans, request.id);
        expect(run.kind).toBe(SpanKind.CONSUMER);
        expect(traceId(run)).toBe(requestTrace);
        expect(sameSpan(run.parentSpanContext, enqueue.spanContext())).toBe(true);
        expect(run.links.some((link) => sameSpan(link.context, enqueue.spanContext()))).toBe(true);
        expect(run.links.some((link) => claims.some((claim) => sameSpan(link.context, claim.spanContext())))).toBe(true);
        expect(run.attributes).toMatchObject({
          'messaging.system': 'statusq',
          'messaging.operation.type': 'process',
          'messaging.destination.name': 'jobs',
          'messaging.message.id': request.id,
          'statusq.job.attempt': 1,
          'statusq.job.outcome': 'done',
        });
        expect(run.status.code).not.toBe(SpanStatusCode.ERROR);

        // The handler ran inside the run span: what it traces is the run's child.
        const work = named(spans, 'handler work').find((span) => traceId(span) === requestTrace)!;
        expect(sameSpan(work.parentSpanContext, run.spanContext())).toBe(true);

        const settle = named(spans, 'settle jobs').find((span) => traceId(span) === requestTrace)!;
        expect(settle.kind).toBe(SpanKind.CLIENT);
        expect(sameSpan(settle.parentSpanContext, run.spanContext())).toBe(true);
        expect(settle.attributes).toMatchObject({ 'messaging.operation.type': 'settle', 'messaging.message.id': request.id, 'statusq.job.outcome': 'done', 'statusq.settle.applied': true });

        // Enqueued outside any span: its run continues the trace its own enqueue span began.
        const rootEnqueue = enqueues.find((span) => traceId(span) !== requestTrace)!;
        expect(rootEnqueue.parentSpanContext).toBeUndefined();
        const untraced = runOf(spans, untracedId!);
        expect(sameSpan(untraced.parentSpanContext, rootEnqueue.spanContext())).toBe(true);
        await env().closeStores();
      });
    });

    it("an outcome other than done is on the run and settle spans: a job given up is failed, its run span's status an error", async () => {
      await withTracing(async (exporter) => {
        const store = await env().store();
        const queue = await tracedJobs(store);
        const [id] = (await queue.enqueue([{ n: 1 }])).map(String);
        const w = await env().startWorker({ store, table: { table: 'jobs' }, ...FAST, exitWhenEmpty: true, handler: (_job, ctx) => ctx.giveUp('not today') });
        await w.done;
        const spans = exporter.getFinishedSpans();
        const run = runOf(spans, id!);
        expect(run.attributes['statusq.job.outcome']).toBe('failed');
        expect(run.status).toEqual({ code: SpanStatusCode.ERROR, message: 'not today' });
        expect(named(spans, 'settle jobs')[0]!.attributes['statusq.job.outcome']).toBe('failed');
        await env().closeStores();
      });
    });

    it('bad input: a trace_context that is not W3C trace context is ignored with one trace-context-ignored event per row (a debug line in statusq work); the job runs, in a trace of its own', async () => {
      await withTracing(async (exporter) => {
        const store = await env().store();
        const queue = await tracedJobs(store);
        const ids = (await queue.enqueue([{ n: 1 }, { n: 2 }, { n: 3 }])).map(String);
        const garbage = ['garbage', '00-00000000000000000000000000000000-0000000000000000-01', 'ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'];
        const q = (name: string) => store.dialect.quoteIdentifier(name);
        for (const [n, value] of garbage.entries()) {
          await store.execute({ sql: `UPDATE ${q('jobs')} SET ${q('trace_context')} = ${store.dialect.placeholder(1)} WHERE ${q('id')} = ${store.dialect.placeholder(2)}`, params: [value, Number(ids[n])] });
        }
        const ignored: Array<{ job: Job; reason: string }> = [];
        const w = await env().startWorker({ store, table: { table: 'jobs' }, ...FAST, exitWhenEmpty: true, handler: () => undefined }, undefined, (worker) => {
          worker.on('trace-context-ignored', (e) => ignored.push(e));
        });
        await w.done;
        expect(w.errors).toEqual([]);
        for (const id of ids) expect(statusOf(await readRow(store, 'jobs', id))).toBe(queue.table.codes.done);
        expect(ignored.map((e) => String(e.job.id)).sort()).toEqual([...ids].sort());
        for (const e of ignored) expect(e.reason).toMatch(/traceparent|all-zero/);
        const spans = exporter.getFinishedSpans();
        for (const id of ids) {
          const run = runOf(spans, id);
          expect(run.parentSpanContext).toBeUndefined();
          expect(run.attributes['statusq.job.outcome']).toBe('done');
        }
        await env().closeStores();
      });
    });

    it('migrate --with tracing adds trace_context to an existing table once; columns.traceContext false turns it off (enqueue writes nothing, runs have no parent)', async () => {
      await withTracing(async (exporter) => {
        const store = await env().store();
        await initTable(store, 'jobs', claimStateBeside() ? { beside: true } : {});
        expect((await Queue.open(store, { table: 'jobs' })).table.features.tracing).toBe(false);
        const first = await migrateTable(store, { table: 'jobs', with: ['tracing'] });
        expect(first.addedColumns).toEqual(['trace_context']);
        expect((await migrateTable(store, { table: 'jobs', with: ['tracing'] })).addedColumns).toEqual([]);
        expect((await Queue.open(store, { table: 'jobs' })).table.features.tracing).toBe(true);
        const off = await Queue.open(store, { table: 'jobs', columns: { traceContext: false } });
        expect(off.table.features.tracing).toBe(false);
        const [id] = await trace.getTracer('conformance').startActiveSpan('request', async (span) => {
          const ids = await off.enqueue([{ n: 1 }]);
          span.end();
          return ids.map(String);
        });
        expect((await readRow(store, 'jobs', id)).trace_context ?? null).toBeNull();
        // Without trace_context a run is the root of a trace of its own, linked to its claim only.
        const w = await env().startWorker({ store, table: { table: 'jobs' }, ...FAST, exitWhenEmpty: true, handler: () => undefined });
        await w.done;
        const run = runOf(exporter.getFinishedSpans(), id!);
        expect(run.parentSpanContext).toBeUndefined();
        expect(run.links.map((link) => link.attributes?.['statusq.link'])).toEqual(['claim']);
        await env().closeStores();
      });
    });
  });
}
