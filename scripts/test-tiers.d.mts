// Types of test-tiers.mjs for the TypeScript test files that import it.
export type Tier = 'unit' | 'conformance' | 'chaos' | 'browser' | 'system';
export type Dialect = 'sqlite' | 'postgres' | 'mysql';
export interface TierEntry {
  files: string;
  dialects?: Dialect[];
}
export declare const TIERS: readonly Tier[];
export declare const DIALECTS: readonly Dialect[];
export declare const TEST_FILES: Record<Exclude<Tier, 'system'>, TierEntry[]>;
export declare const TEST_FILE_GLOBS: readonly string[];
export declare class TierUsageError extends Error {}
export declare function selectedDialects(value?: string): Dialect[];
export declare function dialectSelected(dialect: Dialect): boolean;
export declare function tierFiles(tier: Tier, dialects?: readonly Dialect[]): string[];
export declare function globToRegExp(glob: string): RegExp;
export declare function testReportFile(name?: string): string;
export declare function readTestReports(root: string): { startTime: number; testResults: Array<{ name: string; path: string; [field: string]: unknown }> } | null;
