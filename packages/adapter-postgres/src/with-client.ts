import pg from 'pg';

/** Runs `body` on a client of its own, ended afterwards whatever happens (a dropped connection is not an error). */
export async function withClient<T>(url: string, body: (client: pg.Client) => Promise<T>, connectTimeoutMs = 5000): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: connectTimeoutMs });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await body(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}
