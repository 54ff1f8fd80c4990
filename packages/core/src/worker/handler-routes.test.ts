import { describe, expect, it } from 'vitest';
import { ConfigError, HandlerError } from '../protocol/errors.js';
import type { Job, KindHandlers } from './handler.js';
import { handlerRoutes } from './handler-routes.js';
import type { WorkerOptions } from './worker-options.js';

const job = (kind: string | null): Job => ({ id: 1, row: {}, attempt: 1, payload: {}, kind });

describe('handlerRoutes', () => {
  it('one handler runs every row and claims every kind; handlers by kind run their kind and claim those kinds, sorted', () => {
    const only = async () => 'one';
    expect(handlerRoutes({ handler: only })).toMatchObject({ kinds: null });
    expect(handlerRoutes({ handler: only }).handlerFor(job('anything'))).toBe(only);
    const email = async () => 'email';
    const report = async () => 'report';
    const routes = handlerRoutes({ handlers: { report, email } });
    expect(routes.kinds).toEqual(['email', 'report']);
    expect(routes.handlerFor(job('email'))).toBe(email);
    expect(routes.handlerFor(job('report'))).toBe(report);
    // The claim asks for its kinds only, so these cannot reach a worker; if one did, no wrong handler runs it.
    expect(() => routes.handlerFor(job('archive'))).toThrow(HandlerError);
    expect(() => routes.handlerFor(job(null))).toThrow(/of kind null, which this worker has no handler for/);
  });

  it('refuses a worker with neither, both, an empty map, a map entry that is no function, a malformed kind or a non-object', () => {
    const fn = async () => undefined;
    const refused: Array<[unknown, RegExp]> = [
      [{}, /handler must be a function/],
      [{ handler: fn, handlers: { email: fn } }, /either handler .* or handlers/],
      [{ handlers: {} }, /at least one/],
      [{ handlers: { email: 'nope' } }, /handlers\.email must be a function, got string/],
      [{ handlers: { 'two words': fn } }, /kind must be 1 to 100 letters/],
      [{ handlers: [fn] }, /an object of handler functions by kind .* got an array/],
      [{ handlers: null }, /got null/],
    ];
    for (const [options, message] of refused) expect(() => handlerRoutes(options as never), JSON.stringify(options)).toThrow(message);
    expect(() => handlerRoutes({})).toThrow(ConfigError);
  });

  it("types each kind's payload as declared (checked by the typecheck of this file)", () => {
    interface Payloads {
      email: { to: string };
      report: { day: number };
    }
    const handlers: KindHandlers<Record<string, unknown>, number, Payloads> = {
      email: async (job) => job.payload.to.toUpperCase(),
      // @ts-expect-error: a report's payload has no `to`
      report: async (job) => job.payload.to,
    };
    const options: Pick<WorkerOptions<Record<string, unknown>, number, Payloads>, 'handlers'> = { handlers };
    expect(Object.keys(options.handlers ?? {})).toEqual(['email', 'report']);
  });
});
