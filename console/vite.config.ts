// The console is served by the Authoric server at /console/ and built into the Python package.
import { svelte } from '@sveltejs/vite-plugin-svelte';
import { defineConfig } from 'vitest/config';

// Node's `process`, without pulling in all of @types/node for one variable.
declare const process: { env: Record<string, string | undefined> };
const server = process.env.AUTHORIC_URL ?? 'http://127.0.0.1:8000';

// `@authoric/client` (clients/typescript, a file dependency in package.json) is bundled from its
// TypeScript sources, so the console builds without building the library first.
const client = new URL('../clients/typescript/src/', import.meta.url).pathname;

export default defineConfig({
  base: '/console/',
  plugins: [svelte()],
  resolve: {
    alias: [
      { find: /^@authoric\/client\/admin$/, replacement: `${client}admin.ts` },
      { find: /^@authoric\/client$/, replacement: `${client}index.ts` },
    ],
  },
  // `npm run dev`: the API calls go to a running server (scripts/serve by default).
  server: {
    proxy: {
      '/admin': server,
      '^/[a-z][a-z0-9_]*/(autocrud|auth|subscribe)': server,
    },
  },
  build: {
    outDir: '../platform/authoric/console_dist',
    emptyOutDir: true,
    chunkSizeWarningLimit: 1000,
  },
  test: {
    include: ['src/**/*.test.ts'],
    environment: 'node',
  },
});
