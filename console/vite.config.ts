// The console is served by the Authoric server at /console/ and built into the Python package.
import { svelte } from '@sveltejs/vite-plugin-svelte';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  base: '/console/',
  plugins: [svelte()],
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
