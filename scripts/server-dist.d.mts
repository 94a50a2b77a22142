// Types of scripts/server-dist.mjs (imported by test/cli/production.ts).
export declare const root: string
export declare function serverSources(base?: string): string[]
export declare function fingerprint(base?: string): string
export declare function readStamp(base?: string): { fingerprint: string; files: number; builtAt: string; esbuild: string; node: string } | null
export declare function distEntry(o?: { base?: string; env?: Record<string, string | undefined>; why?: { reason?: string } }): string | null
