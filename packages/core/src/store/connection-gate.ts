/**
 * One transaction at a time on a single connection (a store with only one, such as a file database's): while an interactive transaction awaits
 * between its statements, any other call on the connection would run inside it, so other calls wait for
 * it to end. Each check of the gate and what it admits run in the same synchronous step, so nothing slips
 * in between; calls made while no transaction is open run at once.
 */
export class ConnectionGate {
  private held: Promise<void> | null = null;

  /** Runs the synchronous `call` once no transaction holds the connection. */
  async call<T>(call: () => T): Promise<T> {
    while (this.held) await this.held;
    return call();
  }

  /** Runs `transaction` holding the connection; other holders and calls wait until it settles. */
  async hold<T>(transaction: () => Promise<T>): Promise<T> {
    while (this.held) await this.held;
    let release!: () => void;
    this.held = new Promise((resolve) => (release = resolve));
    try {
      return await transaction();
    } finally {
      this.held = null;
      release();
    }
  }
}
