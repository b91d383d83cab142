"""The embedded PostgreSQL (the `pgserver` package) used when no DATABASE_URL is given.

pgserver counts the processes using a cluster (a list of pids in `pg/.handle_pids.json`)
and, with `cleanup_mode="stop"`, the last of them to exit stops the server. So the embedded
PostgreSQL runs for as long as some `authoric` command uses it: `authoric serve` stops it on
exit unless, say, an `authoric import` is still running on it (which then stops it).
A process killed with SIGKILL never removes its pid; those are pruned here before each use,
or the count would never reach zero again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import ModuleType

HANDLES = ".handle_pids.json"  # pgserver's list of processes using the cluster


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


def _prune_dead_handles(pg_dir: Path) -> None:
    path = pg_dir / HANDLES
    try:
        pids = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and _alive(pid)]
    if alive != pids:
        path.write_text(json.dumps(alive))


def pgserver_module() -> ModuleType:
    """The `pgserver` package, imported without platformdirs' RuntimeDirWarning."""
    # Imported lazily: only needed without DATABASE_URL. pgserver asks platformdirs for a runtime
    # directory while it is imported; without XDG_RUNTIME_DIR (containers, CI, cron, su) that is
    # the private /tmp/runtime-<uid>, which is right here, and platformdirs' warning saying so
    # would print on every command.
    import warnings

    from platformdirs import RuntimeDirWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeDirWarning)
        import pgserver
    return pgserver


def embedded_database_url(data_dir: Path) -> str:
    """Start (or reuse) the embedded server whose files live under `data_dir/pg`; it is
    stopped when the last process using it exits."""
    pgserver = pgserver_module()
    pg_dir = (data_dir / "pg").resolve()
    pg_dir.mkdir(parents=True, exist_ok=True)
    with pgserver.PostgresServer._lock:  # the same inter-process lock pgserver takes
        _prune_dead_handles(pg_dir)
    server = pgserver.get_server(pg_dir, cleanup_mode="stop")
    return str(server.get_uri())
