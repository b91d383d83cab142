"""PostgreSQL's statement log as the fan-out bench reads it (its census): switching
log_statement on and off, reading the statements logged since an offset, and grouping them
by connection role.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \S+ \[(\d+)\] ([^:]*): (\w+):  (.*)$")


async def set_statement_log(dsn: str, on: bool) -> None:
    import asyncpg

    conn = await asyncpg.connect(dsn, server_settings={"application_name": "bench"})
    try:
        if on:
            await conn.execute("ALTER SYSTEM SET log_statement = 'all'")
            await conn.execute("ALTER SYSTEM SET log_line_prefix = '%m [%p] %a: '")
            await conn.execute("ALTER SYSTEM SET log_parameter_max_length = 0")
        else:
            await conn.execute("ALTER SYSTEM RESET log_statement")
            await conn.execute("ALTER SYSTEM RESET log_line_prefix")
            await conn.execute("ALTER SYSTEM RESET log_parameter_max_length")
        await conn.execute("SELECT pg_reload_conf()")
    finally:
        await conn.close()
    await asyncio.sleep(0.3)  # backends pick the new settings up at their next command


def logged_statements(log: Path, offset: int) -> list[tuple[int, str, str]]:
    """(pid, application_name, statement text) for each statement logged after `offset`."""
    out: list[tuple[int, str, str]] = []
    with log.open("rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    current: list[Any] | None = None
    for line in text.splitlines():
        m = LOG_LINE.match(line)
        if m is None:
            if current is not None:
                current[2] += "\n" + line
            continue
        if current is not None:
            out.append(tuple(current))
            current = None
        pid, app, level, message = int(m[1]), m[2], m[3], m[4]
        if level != "LOG":
            continue
        if message.startswith("statement: "):
            current = [pid, app, message[len("statement: "):]]
        elif message.startswith("execute "):
            current = [pid, app, message.split(": ", 1)[1] if ": " in message else message]
    if current is not None:
        out.append(tuple(current))
    return out


def classify(statements: list[tuple[int, str, str]]) -> dict[str, Any]:
    """Group the server's statements: relay, hub (judge + the round trips around it),
    sequencer, and everything else (the REST writes)."""
    kinds: Counter[str] = Counter()
    branches: list[int] = []
    by_pid: dict[int, list[str]] = defaultdict(list)
    for pid, app, sql in statements:
        if app == "bench":
            continue
        if app == "authoric-relay":
            kinds["relay: " + ("log read" if "FROM authoric.changes" in sql else sql[:40])] += 1
        elif app == "authoric-sequencer":
            kinds["sequencer: " + ("stamp" if "nextval('authoric.change_pos')" in sql else
                                   "notify" if "pg_notify" in sql else
                                   "retention" if "log_horizon" in sql else _short(sql))] += 1
        else:
            by_pid[pid].append(sql)
    # Pool connections serve both REST and the hub. A hub dispatch is the transaction holding
    # the judge statement (`... AS k`): BEGIN, app version, judge, ROLLBACK; SQLAlchemy's
    # pool pre-ping (BEGIN, `;`, ROLLBACK) comes right before it.
    for sqls in by_pid.values():
        words = [_short(s) for s in sqls]
        hub = [False] * len(sqls)
        for i, sql in enumerate(sqls):
            if not (" AS k" in sql and "dpos" in sql):
                continue
            branches.append(sql.count("UNION ALL") + 1)
            j = i
            while j > 0 and words[j - 1] not in ("commit", "rollback"):
                j -= 1
            if j >= 2 and words[j - 1] == "rollback" and words[j - 2] in ("begin", "pre-ping"):
                j -= 2
                if j >= 1 and words[j] == "pre-ping" and words[j - 1] == "begin":
                    j -= 1
            end = i + 1 if i + 1 < len(sqls) and words[i + 1] in ("rollback", "commit") else i
            for k in range(j, end + 1):
                hub[k] = True
        for i, sql in enumerate(sqls):
            if not hub[i]:
                kinds["rest"] += 1
            elif " AS k" in sql and "dpos" in sql:
                kinds["hub: judge"] += 1
            else:
                kinds["hub: " + words[i]] += 1
    return {"kinds": kinds, "branches": branches}


def _short(sql: str) -> str:
    s = " ".join(sql.split())
    if s in (";", ""):
        return "pre-ping"
    word = s.split()[0].upper().rstrip(";")
    if word in ("BEGIN", "ROLLBACK", "COMMIT"):
        return word.lower()
    if "authoric.apps.version" in s:
        return "app version"
    return s[:50]
