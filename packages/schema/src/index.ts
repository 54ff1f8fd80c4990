export * from './schema.js';
export { DIALECT_DDL, ddlFor, type DialectDdl } from './dialect-ddl.js';
