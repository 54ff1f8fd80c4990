export async function handle() {}
