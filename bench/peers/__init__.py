"""Authoric and PocketBase side by side: the same members, rows and `wrk` load against both.

    .venv/bin/python -m bench.peers                    # 10 s per cell and system, idle 60 s
    .venv/bin/python -m bench.peers --duration 4 --idle 20

`systems` starts and fills both servers, `wrk` drives one (system, route, concurrency) slice,
`run` interleaves the slices and measures CPU, `report` prints the tables. See
docs/benchmarks.md ("Side by side with PocketBase") for what is measured and how to read it.
"""
