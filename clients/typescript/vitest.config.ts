import { defineConfig } from "vitest/config";

// These tests talk to a real `authoric serve` started by tests/clients/test_typescript_client.py,
// which passes its URL, admin token, test-clock file and restart control in the environment.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 300_000, // wide: only a broken run comes near it (the restart test takes ~30-60 s on a busy box)
    hookTimeout: 60_000,
    fileParallelism: false,
  },
});
