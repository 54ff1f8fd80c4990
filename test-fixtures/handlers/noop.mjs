export default async function noop() {}
