/** Waiting on the bench's child processes (burn-downs, isolated runs, idle pick-up) without hanging on one. */
import type { ChildProcess } from 'node:child_process';

/** Waits for the child to exit by itself, or kills it once `deadline` aborts. */
export function exited(child: ChildProcess, deadline: AbortSignal): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const kill = () => child.kill('SIGKILL');
    if (deadline.aborted) kill();
    else deadline.addEventListener('abort', kill, { once: true });
    child.once('exit', () => {
      deadline.removeEventListener('abort', kill);
      resolve();
    });
  });
}

/** Resolves on the child's first message of `type`; rejects if it exits before sending one or `deadline` aborts. */
export function onMessage(child: ChildProcess, type: string, deadline: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const cleanup = () => {
      child.off('exit', onExit);
      child.off('message', onMessage);
      deadline.removeEventListener('abort', onDeadline);
    };
    const onExit = (code: number | null) => {
      cleanup();
      reject(new Error(`bench child exited with ${code} before "${type}"`));
    };
    const onDeadline = () => {
      cleanup();
      reject(new Error(`bench child sent no "${type}" within the run's bound`));
    };
    const onMessage = (message: { type: string }) => {
      if (message.type !== type) return;
      cleanup();
      resolve();
    };
    child.once('exit', onExit);
    child.on('message', onMessage);
    if (deadline.aborted) onDeadline();
    else deadline.addEventListener('abort', onDeadline, { once: true });
  });
}
