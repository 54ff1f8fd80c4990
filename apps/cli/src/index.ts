export { main, USAGE } from './main.js';
export type { Io } from './with-store.js';
