"""Benchmarks that print figures (not timed tests). See bench/README.md."""
