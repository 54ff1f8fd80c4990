// The dashboard's page: built into ../dist/dashboard/ (index.html + assets/), which `statusq dashboard`
// serves and the npm tarball ships. It lives here, not beside apps/cli's vitest config, so vitest never
// loads it. `vite dashboard` (from apps/cli) serves the page with hot reload and sends /api/ to a running
// `statusq dashboard` (STATUSQ_DASHBOARD_URL, default http://127.0.0.1:4300).
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import preact from '@preact/preset-vite';
import { defineConfig, type Plugin } from 'vite';

const outDir = fileURLToPath(new URL('../dist/dashboard/', import.meta.url));

/**
 * tsc writes the server's own modules (src/dashboard/) into the same folder first, so the folder is not
 * emptied; only the page's previous output goes, or stale hashed assets would pile up in the tarball.
 */
function removePreviousPage(): Plugin {
  return {
    name: 'statusq-remove-previous-page',
    apply: 'build',
    buildStart() {
      rmSync(`${outDir}assets`, { recursive: true, force: true });
      rmSync(`${outDir}index.html`, { force: true });
    },
  };
}

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  // Relative asset URLs, so the page also works behind a reverse proxy under a path prefix.
  base: './',
  plugins: [preact(), removePreviousPage()],
  build: { outDir, emptyOutDir: false, target: 'es2022' },
  server: { proxy: { '/api': process.env.STATUSQ_DASHBOARD_URL ?? 'http://127.0.0.1:4300' } },
});
