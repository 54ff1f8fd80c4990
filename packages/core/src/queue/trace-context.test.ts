import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT_CONTEXT, TraceFlags, context, createTraceState, trace, type Context, type ContextManager } from '@opentelemetry/api';
import { loadTracing, parseTraceContext, traceContextValue } from './trace-context.js';
import type { ResolvedTable } from '../protocol/table.js';

/** A synchronous context manager: enough for context.with around a synchronous call, without async hooks. */
class StackContextManager implements ContextManager {
  private current: Context = ROOT_CONTEXT;
  active(): Context {
    return this.current;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(ctx: Context, fn: F, thisArg?: ThisParameterType<F>, ...args: A): ReturnType<F> {
    const before = this.current;
    this.current = ctx;
    try {
      return fn.call(thisArg, ...args);
    } finally {
      this.current = before;
    }
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    return this;
  }
}

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN_ID = '00f067aa0ba902b7';
const table = (limit?: number) => ({ table: 'jobs', columns: { traceContext: 'trace_context' }, limits: limit === undefined ? {} : { traceContext: { chars: limit } } }) as unknown as ResolvedTable;

describe('trace_context: written as W3C trace context, read back or refused', () => {
  beforeAll(async () => {
    expect(await loadTracing()).not.toBeNull();
    context.setGlobalContextManager(new StackContextManager());
  });
  afterAll(() => context.disable());

  const active = (traceState?: string) =>
    trace.setSpanContext(ROOT_CONTEXT, { traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: TraceFlags.SAMPLED, ...(traceState !== undefined && { traceState: createTraceState(traceState) }) });

  it('the active span context as traceparent, then a space and the tracestate; read back as the same remote context', () => {
    expect(context.with(active(), () => traceContextValue(table()))).toBe(`00-${TRACE_ID}-${SPAN_ID}-01`);
    const value = context.with(active('congo=t61rcWkgMzE,rojo=00f067aa0ba902b7'), () => traceContextValue(table()));
    expect(value).toBe(`00-${TRACE_ID}-${SPAN_ID}-01 congo=t61rcWkgMzE,rojo=00f067aa0ba902b7`);
    const parsed = parseTraceContext(value);
    expect(parsed).not.toBeNull();
    expect('context' in parsed! && parsed.context).toMatchObject({ traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: 1, isRemote: true });
    expect('context' in parsed! && parsed.context.traceState?.get('rojo')).toBe('00f067aa0ba902b7');
  });

  it('nothing without a valid active span or without the column; a tracestate the column cannot hold is left out', () => {
    expect(traceContextValue(table())).toBeNull();
    expect(context.with(active(), () => traceContextValue({ ...table(), columns: {} } as ResolvedTable))).toBeNull();
    expect(context.with(active('congo=t61rcWkgMzE'), () => traceContextValue(table(60)))).toBe(`00-${TRACE_ID}-${SPAN_ID}-01`);
  });

  it('no value is no context; anything else not W3C trace context says why', () => {
    for (const none of [null, undefined, '']) expect(parseTraceContext(none)).toBeNull();
    const invalid = [
      42,
      'garbage',
      `00-${TRACE_ID.toUpperCase()}-${SPAN_ID}-01`,
      `ff-${TRACE_ID}-${SPAN_ID}-01`,
      `00-${'0'.repeat(32)}-${SPAN_ID}-01`,
      `00-${TRACE_ID}-${'0'.repeat(16)}-01`,
      `00-${TRACE_ID}-${SPAN_ID}-01-extra`,
      `00-${TRACE_ID}-${SPAN_ID}-1`,
    ];
    for (const value of invalid) expect(parseTraceContext(value), String(value)).toHaveProperty('invalid');
    // A later version may add fields, which a reader of version 00 ignores.
    expect(parseTraceContext(`01-${TRACE_ID}-${SPAN_ID}-00-more`)).toHaveProperty('context');
  });
});
