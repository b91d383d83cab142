"""CSV import through `POST /{app}/autocrud/{table}/import` against a raw PostgreSQL `COPY`.

Generates a 6-column CSV (text, integer, numeric, timestamp, boolean, date) per size, starts
`authoric serve` on a fresh embedded PostgreSQL under a temp dir (or on DATABASE_URL when
set), and for each size:

- streams the file from disk to the import endpoint (httpx, `content=` a file iterator), as a
  member of one org, into a fresh table;
- `COPY`s the same file (asyncpg `copy_to_table`, CSV with header) into a plain table of the
  same six columns, and into one shaped like the Authoric table (an ordered uid primary key,
  org_uid, created_at/updated_at, the (org_uid, uid) unique index), both fresh;
- samples the server process's VmRSS every 20 ms and reads its VmHWM (peak RSS) after
  resetting it (`/proc/<pid>/clear_refs`), and the CPU seconds of the server and of
  PostgreSQL over the import.

Prints seconds, rows/s, the endpoint/COPY ratio (target: at most 2x) and peak server RSS
(target: flat as the file grows).

With `--duplicate-last`, per size it also imports into a table whose `name` is unique: the
clean file (201), then the same file with line 2's name repeated on one more last line (422
naming that line), and prints both times and CPU: one bad line late in a big file must cost
about what the clean import costs (issue 19: the check was quadratic).

    .venv/bin/python -m bench.import_csv                         # 100k and 1M rows
    .venv/bin/python -m bench.import_csv --rows 1000000
    .venv/bin/python -m bench.import_csv --rows 100000,1000000 --repeat 3 --json out.json
    .venv/bin/python -m bench.import_csv --rows 1000000 --duplicate-last --no-clean
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from bench.harness import Server, database
from bench.harness import running_server as harness_server

COLUMNS: list[dict[str, Any]] = [
    {"name": "name", "type": "text", "required": True},
    {"name": "qty", "type": "integer"},
    {"name": "price", "type": "numeric"},
    {"name": "seen_at", "type": "timestamp"},
    {"name": "active", "type": "boolean"},
    {"name": "day", "type": "date"},
]
PLAIN_DDL = ("name text NOT NULL, qty bigint, price numeric, seen_at timestamptz, "
             "active boolean, day date")
# Ordered uids, as UUIDv7 are (random ones would make the index inserts far costlier).
SHAPED_DDL = ("uid uuid PRIMARY KEY DEFAULT lpad(to_hex(nextval('bench_uid')), 32, '0')::uuid, "
              "org_uid uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001', "
              f"{PLAIN_DDL}, created_at timestamptz NOT NULL DEFAULT now(), "
              "updated_at timestamptz NOT NULL DEFAULT now(), UNIQUE (org_uid, uid)")
NAMES = [str(c["name"]) for c in COLUMNS]
CHUNK = 1 << 20


# --- the file ---------------------------------------------------------------------------------

def write_csv(path: Path, rows: int, seed: int = 7) -> int:
    """A CSV of `rows` rows (plus header); returns its size in bytes."""
    rnd = random.Random(seed)
    base = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    words = ["alpha", "beta", "gamma", "delta", "epsilon, with comma", 'say "hi"', "zeta", "eta"]
    with path.open("w", encoding="utf-8", newline="") as out:
        out.write(",".join(NAMES) + "\n")
        batch: list[str] = []
        for i in range(rows):
            word = words[rnd.randrange(len(words))]
            name = f'"{word.replace(chr(34), chr(34) * 2)} {i}"' if ("," in word or '"' in word) \
                else f"{word} {i}"
            at = base + dt.timedelta(seconds=rnd.randrange(90 * 86400))
            batch.append(f"{name},{rnd.randrange(-10**6, 10**6)},{rnd.randrange(10**7) / 100:.2f},"
                         f"{at.isoformat().replace('+00:00', 'Z')},"
                         f"{'true' if rnd.random() < 0.5 else 'false'},{at.date().isoformat()}\n")
            if len(batch) >= 10_000:
                out.write("".join(batch))
                batch.clear()
        out.write("".join(batch))
    return path.stat().st_size


def file_chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            yield chunk


# --- the server ----------------------------------------------------------------------------------

@contextlib.contextmanager
def running_server(work: Path) -> Iterator[Server]:
    """`authoric serve` (one process) on DATABASE_URL, or on a fresh embedded PostgreSQL."""
    with database(work) as db, harness_server(work, db) as server:
        yield server


def _status(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            key, value = line.split(":", 1)
            out[key] = int(value.split()[0]) * 1024
    return out


def reset_peak(pid: int) -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False if not allowed."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


class RssSampler:
    """Max VmRSS of `pid`, sampled every `every` seconds in a thread."""

    def __init__(self, pid: int, every: float = 0.02) -> None:
        self.pid, self.every = pid, every
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _status(self.pid)["VmRSS"])
            self._stop.wait(self.every)

    def __enter__(self) -> RssSampler:
        self.peak = _status(self.pid)["VmRSS"]
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _status(self.pid)["VmRSS"])


CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2:].split()  # fields from `state` on


def cpu_seconds(root: int | None) -> float:
    """User + system CPU of `root` and its descendants (live ones, and the waited-for dead)."""
    if root is None:
        return 0.0
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (fields := _stat(int(entry.name))):
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        if fields := _stat(pid):
            total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        stack.extend(children.get(pid, []))
    return total / CLK_TCK


# --- one size -----------------------------------------------------------------------------------

@dataclass
class Result:
    rows: int
    file_bytes: int
    endpoint_s: list[float] = field(default_factory=list)
    copy_plain_s: list[float] = field(default_factory=list)
    copy_shaped_s: list[float] = field(default_factory=list)
    rss_before: int = 0
    rss_peak_sampled: int = 0
    rss_hwm: int | None = None
    server_cpu: list[float] = field(default_factory=list)
    db_cpu: list[float] = field(default_factory=list)
    client_cpu: list[float] = field(default_factory=list)
    copy_db_cpu: list[float] = field(default_factory=list)

    @property
    def endpoint(self) -> float:
        return statistics.median(self.endpoint_s)

    @property
    def copy_plain(self) -> float:
        return statistics.median(self.copy_plain_s)

    @property
    def copy_shaped(self) -> float:
        return statistics.median(self.copy_shaped_s)

    @property
    def server_cpu_s(self) -> float:
        return statistics.median(self.server_cpu)

    @property
    def db_cpu_s(self) -> float:
        return statistics.median(self.db_cpu)

    @property
    def client_cpu_s(self) -> float:
        return statistics.median(self.client_cpu)

    @property
    def copy_db_cpu_s(self) -> float:
        return statistics.median(self.copy_db_cpu)


class App:
    """One app with one org and a member who may create and list every table."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.admin = httpx.Client(base_url=server.url, timeout=120,
                                  headers={"Authorization": f"Bearer {server.admin_token}"})
        self.name = f"bench_{os.getpid()}"
        self._ok(self.admin.post("/admin/apps", json={"name": self.name}))
        self.base = f"/admin/apps/{self.name}"
        org = self._ok(self.admin.post(f"{self.base}/orgs", json={"name": "Bench"}))["uid"]
        self._ok(self.admin.put(f"{self.base}/roles/loader", json={"permissions": ["*:*"]}))
        user = self._ok(self.admin.post(f"{self.base}/users", json={
            "email": "loader@bench.test", "password": "bench-password"}))
        self._ok(self.admin.put(f"{self.base}/orgs/{org}/members/{user['uid']}",
                                json={"roles": ["loader"]}))
        pair = self._ok(httpx.post(f"{server.url}/{self.name}/auth/token", json={
            "email": "loader@bench.test", "password": "bench-password"}, timeout=60))
        self.token = pair["access_token"]

    @staticmethod
    def _ok(response: httpx.Response) -> Any:
        if response.status_code >= 300:
            raise SystemExit(f"{response.request.method} {response.request.url}: "
                             f"{response.status_code} {response.text[:2000]}")
        return response.json()

    def table(self, name: str) -> None:
        self._ok(self.admin.post(f"{self.base}/tables", json={"name": name, "columns": COLUMNS}))

    def schema(self) -> str:
        uid = self._ok(self.admin.get(self.base))["uid"]
        return f"app_{uid.replace('-', '')}"

    def import_file(self, table: str, path: Path) -> dict[str, Any]:
        return dict(self._ok(self.post_file(table, path)))

    def post_file(self, table: str, path: Path) -> httpx.Response:
        with httpx.Client(base_url=self.server.url, timeout=httpx.Timeout(60, read=3600)) as client:
            return client.post(f"/{self.name}/autocrud/{table}/import", content=file_chunks(path),
                               headers={"Authorization": f"Bearer {self.token}",
                                        "Content-Type": "text/csv"})


async def copy_into(db_url: str, table: str, ddl: str, path: Path) -> float:
    conn = await asyncpg.connect(db_url)
    try:
        await conn.execute(f'DROP TABLE IF EXISTS "{table}"; CREATE SEQUENCE IF NOT EXISTS bench_uid; '
                           f'CREATE TABLE "{table}" ({ddl})')
        start = time.perf_counter()
        await conn.copy_to_table(table, source=str(path), columns=NAMES, format="csv", header=True)
        elapsed = time.perf_counter() - start
        await conn.execute(f'DROP TABLE "{table}"')
        return elapsed
    finally:
        await conn.close()


def _own_cpu() -> float:
    t = os.times()
    return t.user + t.system


def run_size(app: App, db_url: str, work: Path, rows: int, repeat: int,
             profile: Path | None) -> Result:
    path = work / f"import_{rows}.csv"
    result = Result(rows, write_csv(path, rows))
    pid = app.server.process.pid
    for i in range(repeat):
        table = f"rows_{rows}_{i}"
        app.table(table)
        can_reset = reset_peak(pid)
        result.rss_before = _status(pid)["VmRSS"]
        cpu0, db0, own0 = cpu_seconds(pid), cpu_seconds(app.server.db_pid), _own_cpu()
        spy = _py_spy(pid, profile) if profile is not None and i == 0 else None
        with RssSampler(pid) as sampler:
            start = time.perf_counter()
            got = app.import_file(table, path)
            result.endpoint_s.append(time.perf_counter() - start)
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
        if got != {"inserted": rows}:
            raise SystemExit(f"unexpected answer: {got}")
        result.server_cpu.append(cpu_seconds(pid) - cpu0)
        result.db_cpu.append(cpu_seconds(app.server.db_pid) - db0)
        result.client_cpu.append(_own_cpu() - own0)
        result.rss_peak_sampled = max(result.rss_peak_sampled, sampler.peak)
        if can_reset:
            result.rss_hwm = max(result.rss_hwm or 0, _status(pid)["VmHWM"])
        asyncio.run(_drop_app_table(db_url, app.schema(), table))
        db0 = cpu_seconds(app.server.db_pid)
        result.copy_plain_s.append(asyncio.run(copy_into(db_url, "bench_copy_plain", PLAIN_DDL, path)))
        result.copy_db_cpu.append(cpu_seconds(app.server.db_pid) - db0)
        result.copy_shaped_s.append(asyncio.run(copy_into(db_url, "bench_copy_shaped", SHAPED_DDL,
                                                          path)))
    path.unlink()
    return result


def _py_spy(pid: int, out: Path) -> subprocess.Popen[bytes]:
    """Sample the server with py-spy (collapsed stacks, with native frames off) until SIGINT."""
    exe = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
    spy = subprocess.Popen([exe, "record", "-p", str(pid), "-o", str(out), "--format", "raw",
                            "-r", "200"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # let it attach
    return spy


async def _drop_app_table(db_url: str, schema: str, table: str) -> None:
    """Truncate the imported rows so later sizes start from the same database size."""
    conn = await asyncpg.connect(db_url)
    try:
        await conn.execute(f'TRUNCATE "{schema}"."{table}"')
        await conn.execute("CHECKPOINT")
    finally:
        await conn.close()


@dataclass
class DuplicateResult:
    rows: int
    clean_s: float
    clean_cpu: float
    duplicate_s: float
    duplicate_cpu: float
    answer: str


def run_duplicate(app: App, db_url: str, work: Path, rows: int) -> DuplicateResult:
    """The clean file into a table with a unique `name`, then the file plus a last line that
    repeats line 2's name (must answer 422 naming that line)."""
    path = work / f"import_{rows}.csv"
    write_csv(path, rows)
    with path.open("rb") as handle:
        handle.readline()
        first = handle.readline()
    dup = work / f"import_{rows}_dup.csv"
    shutil.copyfile(path, dup)
    with dup.open("ab") as out:
        out.write(first)
    pid, times, cpus = app.server.process.pid, [], []
    answer = ""
    for i, source in enumerate((path, dup)):
        table = f"unique_{rows}_{i}"
        app._ok(app.admin.post(f"{app.base}/tables", json={"name": table, "columns": [
            {**COLUMNS[0], "unique": True}, *COLUMNS[1:]]}))
        cpu0 = cpu_seconds(pid) + cpu_seconds(app.server.db_pid)
        start = time.perf_counter()
        response = app.post_file(table, source)
        times.append(time.perf_counter() - start)
        cpus.append(cpu_seconds(pid) + cpu_seconds(app.server.db_pid) - cpu0)
        expected = 201 if source is path else 422
        if response.status_code != expected:
            raise SystemExit(f"unexpected answer {response.status_code}: {response.text[:500]}")
        answer = response.text[:200]
        if source is path:
            asyncio.run(_drop_app_table(db_url, app.schema(), table))
    path.unlink()
    dup.unlink()
    return DuplicateResult(rows, times[0], cpus[0], times[1], cpus[1], answer)


def duplicate_report(results: list[DuplicateResult]) -> str:
    lines = [f"{'rows':>9} {'clean':>8} {'cpu':>7} {'dup last':>9} {'cpu':>7} {'ratio':>6}"]
    for r in results:
        lines.append(f"{r.rows:>9} {r.clean_s:>7.2f}s {r.clean_cpu:>6.1f}s {r.duplicate_s:>8.2f}s "
                     f"{r.duplicate_cpu:>6.1f}s {r.duplicate_s / r.clean_s:>5.2f}x")
    lines.append("clean = the file into a table with a unique name (201); dup last = the same file "
                 "plus one last line repeating line 2's name (422 naming it); cpu = server + "
                 "PostgreSQL CPU seconds.")
    return "\n".join(lines)


# --- report -------------------------------------------------------------------------------------

def mib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / 2**20:.0f} MiB"


def report(results: list[Result]) -> str:
    lines = [
        f"{'rows':>9} {'file':>8} {'endpoint':>10} {'rows/s':>9} {'COPY':>8} {'rows/s':>9} "
        f"{'ratio':>6} {'COPY*':>8} {'ratio*':>6} {'RSS before':>11} {'peak RSS':>9} "
        f"{'VmHWM':>8} {'srv CPU':>8} {'pg CPU':>7} {'cli CPU':>7} {'COPY pg CPU':>11} "
        f"{'CPU ratio':>9}"]
    for r in results:
        lines.append(
            f"{r.rows:>9} {r.file_bytes / 2**20:>6.1f}Mi {r.endpoint:>9.2f}s {r.rows / r.endpoint:>9.0f} "
            f"{r.copy_plain:>7.2f}s {r.rows / r.copy_plain:>9.0f} {r.endpoint / r.copy_plain:>5.2f}x "
            f"{r.copy_shaped:>7.2f}s {r.endpoint / r.copy_shaped:>5.2f}x {mib(r.rss_before):>11} "
            f"{mib(r.rss_peak_sampled):>9} {mib(r.rss_hwm):>8} {r.server_cpu_s:>7.1f}s "
            f"{r.db_cpu_s:>6.1f}s {r.client_cpu_s:>6.1f}s {r.copy_db_cpu_s:>10.1f}s "
            f"{(r.server_cpu_s + r.db_cpu_s) / max(r.copy_db_cpu_s, 1e-9):>8.1f}x")
    lines.append("COPY = raw COPY into a plain 6-column table; COPY* = into a table shaped like the "
                 "Authoric one (ordered uid pk, org_uid, timestamps, unique (org_uid, uid)); ratio = "
                 "endpoint / COPY (target <= 2x). Times and CPU are medians of the repeats. "
                 "CPU: seconds used by the server process, PostgreSQL (all backends) and this "
                 "client during the import, and by "
                 "PostgreSQL during the plain COPY; CPU ratio = (server + PostgreSQL) / COPY's, which "
                 "other load on the machine affects far less than wall time.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.import_csv", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="100000,1000000",
                        help="comma-separated file sizes in rows (default: 100000,1000000)")
    parser.add_argument("--repeat", type=int, default=1, help="imports per size (median reported)")
    parser.add_argument("--work-dir", help="where the CSV files and the database go (default: a "
                                           "temp dir, removed afterwards)")
    parser.add_argument("--json", help="also write the results as JSON to this file")
    parser.add_argument("--py-spy", metavar="FILE", help="profile the server with py-spy during the "
                        "first import of the largest size; collapsed stacks go to FILE")
    parser.add_argument("--duplicate-last", action="store_true",
                        help="also time a file whose last line repeats a unique value (422)")
    parser.add_argument("--no-clean", action="store_true",
                        help="skip the endpoint-against-COPY comparison")
    args = parser.parse_args(argv)
    sizes = [int(x.replace("_", "")) for x in args.rows.split(",") if x.strip()]
    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="authoric-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, "
          f"{platform.platform()}, Python {platform.python_version()}, load avg "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    results: list[Result] = []
    duplicates: list[DuplicateResult] = []
    try:
        with running_server(work) as server:
            app = App(server)
            for rows in sizes:
                print(f"... {rows} rows", flush=True)
                profile = Path(args.py_spy) if args.py_spy and rows == max(sizes) else None
                if not args.no_clean:
                    results.append(run_size(app, server.db_url, work, rows, args.repeat, profile))
                    print(report(results[-1:]).splitlines()[1], flush=True)
                if args.duplicate_last:
                    duplicates.append(run_duplicate(app, server.db_url, work, rows))
                    print(duplicate_report(duplicates[-1:]).splitlines()[1], flush=True)
    finally:
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    if results:
        print(report(results))
    if duplicates:
        print(duplicate_report(duplicates))
        print(duplicates[-1].answer)
    print(f"load avg after: {os.getloadavg()[0]:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps([{**asdict(r), "endpoint": r.endpoint,
                                                "copy_plain": r.copy_plain,
                                                "copy_shaped": r.copy_shaped,
                                                "server_cpu_s": r.server_cpu_s, "db_cpu_s": r.db_cpu_s,
                                                "copy_db_cpu_s": r.copy_db_cpu_s} for r in results],
                                              indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
