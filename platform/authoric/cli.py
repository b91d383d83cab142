"""The `authoric` command: `serve`, `migrate`, `import`, `export`, `seed`."""

from __future__ import annotations

import argparse
import asyncio
import atexit
import os
import shutil
import signal
import socket
import sys
import tempfile
from pathlib import Path

from authoric.auth.secrets import Secret, ensure_secrets
from authoric.db import migrate
from authoric.db.embedded import embedded_database_url
from authoric.settings import Settings
from authoric.workers import per_worker_socket, reuse_port_available


def database_url(settings: Settings) -> str:
    """DATABASE_URL, or the embedded server's (started on demand)."""
    return settings.database_url or embedded_database_url(settings.data_dir)


def cmd_migrate(settings: Settings, args: argparse.Namespace) -> int:
    url = database_url(settings)
    if args.downgrade:
        migrate.downgrade(url, args.downgrade)
    else:
        migrate.upgrade(url)
    print("migrations applied")
    return 0


MAX_DEFAULT_WORKERS = 3
WORKER_HEALTHCHECK = 60  # seconds a worker may take to answer the supervisor
STARTUP_FAILURE = 3  # uvicorn's exit status for a server that never started


def default_workers() -> int:
    """One worker per core this process may run on, at most 3.

    Each worker is a whole server: up to 3 x AUTHORIC_DB_POOL_SIZE connections (the SQLAlchemy
    pool and its overflow, and the request path's asyncpg pool) plus two dedicated ones, 32
    with the defaults. The cap keeps a default install under PostgreSQL's default
    max_connections of 100. More cores than that are better used by more replicas."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_DEFAULT_WORKERS))


WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})


def announced_base(host: str, port: int, public_url: str | None = None) -> str:
    """The address to print: AUTHORIC_PUBLIC_URL when set (behind a proxy or a port mapping
    only the operator knows it), else the listening address, where a wildcard host (every
    interface, as in a container) becomes localhost: 0.0.0.0 is no address a browser opens."""
    if public_url:
        return public_url.rstrip("/")
    shown = "localhost" if host in WILDCARD_HOSTS else host
    return f"http://[{shown}]:{port}" if ":" in shown else f"http://{shown}:{port}"


def listen_refusal(host: str, port: int) -> str | None:
    """Why the server could not listen on host:port (e.g. another server holds the port), as
    the operator should read it, with the way out; None when it can. Asked before anything
    is printed or started, so a taken port is the first and only thing said."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        return (f"cannot listen on {host}:{port}: {reason}. Is another server running there? "
                f"Stop it, or start on another port: --port {port + 1}")
    return None


def announce(base: str, token: Secret, smtp: bool = False) -> None:
    """Where the server is, and its mail; the admin token only when generated just now (never
    one from the environment, never again on later starts: logs are kept longer than
    terminals)."""
    print(f"Authoric is starting at {base}", flush=True)
    print(f"console: {base}/console/ (sign in with the admin token)", flush=True)
    if smtp:
        print("mail: sent through AUTHORIC_SMTP_URL", flush=True)
    else:
        print(f"mail: no AUTHORIC_SMTP_URL, so account mail stays in each app's mailbox: the "
              f"console's Mail page, or GET {base}/admin/apps/{{app}}/mail", flush=True)
    if token.created:
        print(f"admin token (generated, kept in {token.path}): {token.value}", flush=True)
        print(f"try: curl -H 'Authorization: Bearer {token.value}' {base}/admin/apps", flush=True)
    elif token.path is not None:
        print(f"admin token: in {token.path}", flush=True)
    else:
        print("admin token: from AUTHORIC_ADMIN_TOKEN", flush=True)


def cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    import uvicorn

    from authoric.observability.logs import log_config

    refusal = listen_refusal(args.host, args.port)
    if refusal is not None:
        print(refusal, file=sys.stderr, flush=True)
        return STARTUP_FAILURE
    url = database_url(settings)
    migrate.upgrade(url)
    # Workers re-read settings from the environment: hand them the resolved database.
    os.environ["DATABASE_URL"] = url
    os.environ["AUTHORIC_DATA_DIR"] = str(settings.data_dir)
    # Secrets exist before any worker starts: workers only read them, never race to create.
    token = ensure_secrets(settings)
    workers = args.workers or settings.workers or default_workers()
    os.environ["AUTHORIC_WORKERS"] = str(workers)  # each worker's share of the streams' slots
    if workers > 1 and "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
        # Workers' metrics live in shared files, summed when any worker is scraped.
        metrics_dir = tempfile.mkdtemp(prefix="authoric-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    if workers > 1:
        # Where the workers hand subscribe requests to the one serving their org's streams
        # (serving/handoff.py); private to this user (mkdtemp: mode 0700), gone when serve ends.
        handoff_dir = tempfile.mkdtemp(prefix="authoric-streams-")
        atexit.register(shutil.rmtree, handoff_dir, ignore_errors=True)
        os.environ["AUTHORIC_STREAM_HANDOFF_DIR"] = handoff_dir
    announce(announced_base(args.host, args.port, settings.public_url), token,
             bool(settings.smtp_url))
    # uvicorn re-raises the signal that stopped it once it has shut down gracefully; with
    # these handlers in place that is a no-op, so we return 0 and atexit stops the embedded
    # PostgreSQL (instead of dying by the signal, leaving it running).
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    # X-Forwarded-For is believed only from AUTHORIC_TRUSTED_PROXIES (none by default), never
    # from uvicorn's own default (any loopback peer): the client address keys the throttle.
    trusted = settings.trusted_proxies.strip()
    config = uvicorn.Config(
        "authoric.app:app_from_env", factory=True, host=args.host, port=args.port,
        workers=workers, log_level=args.log_level,
        proxy_headers=bool(trusted), forwarded_allow_ips=trusted or None,
        access_log=args.access_log and settings.log_format != "json",
        log_config=log_config(settings.log_format, args.log_level, args.access_log),
        timeout_graceful_shutdown=settings.shutdown_grace,
        # A worker answers the supervisor's pings only once it has imported everything; on a
        # busy machine that takes longer than uvicorn's 5 s, and the worker would be killed
        # and restarted in a loop.
        timeout_worker_healthcheck=WORKER_HEALTHCHECK)
    if workers == 1:
        server = uvicorn.Server(config)
        server.run()
        return 0 if server.started else STARTUP_FAILURE
    # uvicorn's supervisor; each worker listens on a socket of its own (authoric.workers).
    from uvicorn.supervisors import Multiprocess

    try:
        shared = (per_worker_socket(args.host, args.port) if reuse_port_available()
                  else config.bind_socket())
    except OSError:  # taken since the check above
        print(listen_refusal(args.host, args.port) or f"cannot listen on {args.host}:{args.port}",
              file=sys.stderr, flush=True)
        return STARTUP_FAILURE
    Multiprocess(config, sockets=[shared]).run()
    return 0


def cmd_import(settings: Settings, args: argparse.Namespace) -> int:
    from authoric.commands.transfer import run_import

    migrate.upgrade(database_url(settings))
    return asyncio.run(run_import(Path(args.file), args.app, args.table, args.org))


def cmd_export(settings: Settings, args: argparse.Namespace) -> int:
    from authoric.commands.transfer import run_export

    migrate.upgrade(database_url(settings))
    out = Path(args.out) if args.out else None
    return asyncio.run(run_export(args.app, args.table, args.org, out, args.filter))


def cmd_seed(settings: Settings, args: argparse.Namespace) -> int:
    from authoric.commands.seed import run_seed

    if not args.demo:
        print("only `authoric seed --demo` exists so far", file=sys.stderr)
        return 2
    migrate.upgrade(database_url(settings))
    return asyncio.run(run_seed(args.app, args.url))


def cmd_typegen(settings: Settings, args: argparse.Namespace) -> int:
    from authoric.typegen import run_typegen

    return run_typegen(settings, args.app, args.lang, args.url, args.token,
                       Path(args.out) if args.out else None)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="authoric", description=__doc__)
    sub = root.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="apply migrations and run the HTTP server")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=None,
                       help="server processes (default: AUTHORIC_WORKERS, else one per core, "
                            f"at most {MAX_DEFAULT_WORKERS})")
    serve.add_argument("--log-level", default="info")
    serve.add_argument("--access-log", action=argparse.BooleanOptionalAction, default=True)
    serve.set_defaults(run=cmd_serve)
    mig = sub.add_parser("migrate", help="apply the platform migrations")
    mig.add_argument("--downgrade", metavar="REVISION", help="revert down to REVISION (e.g. base)")
    mig.set_defaults(run=cmd_migrate)
    imp = sub.add_parser("import", help="import a CSV file into a table, in one org")
    imp.add_argument("file")
    for p in (imp, exp := sub.add_parser("export", help="export a table's rows of one org as CSV")):
        p.add_argument("--app", required=True)
        p.add_argument("--table", required=True)
        p.add_argument("--org", required=True, help="the org: its name or its uid")
    imp.set_defaults(run=cmd_import)
    exp.add_argument("--out", help="file to write (default: standard output)")
    exp.add_argument("--filter", help="a JSON filter, as in ?filter=")
    exp.set_defaults(run=cmd_export)
    seed = sub.add_parser("seed", help="create sample data")
    seed.add_argument("--demo", action="store_true", help="the demo app: vendors, invoices, payments")
    seed.add_argument("--app", default="demo", help="name of the app to create (default: demo)")
    seed.add_argument("--url", default="http://127.0.0.1:8000", help="server URL for the hints")
    seed.set_defaults(run=cmd_seed)
    typegen = sub.add_parser("typegen", help="write an app's row types for client code, from "
                             "the OpenAPI document of a running server")
    typegen.add_argument("--app", required=True)
    typegen.add_argument("--lang", required=True, choices=("ts", "py"))
    typegen.add_argument("--url", default="http://127.0.0.1:8000", help="the server")
    typegen.add_argument("--token", help="admin token (default: AUTHORIC_ADMIN_TOKEN, else the "
                         "one kept in the data directory)")
    typegen.add_argument("--out", help="file to write (default: standard output)")
    typegen.set_defaults(run=cmd_typegen)
    return root


DATA_COMMANDS = ("import", "export", "seed")
EXIT_OTHER = 3  # import/export/seed: anything but done (0), refused (1) or a wrong name (2)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.run(Settings(), args))
    except Exception as exc:
        if args.command not in DATA_COMMANDS:
            raise
        # An unreachable database (say) must not look like a refused file (exit 1).
        first = (str(exc).splitlines() or [""])[0]
        print(f"authoric {args.command}: {type(exc).__name__}: {first}", file=sys.stderr)
        return EXIT_OTHER


if __name__ == "__main__":
    sys.exit(main())
