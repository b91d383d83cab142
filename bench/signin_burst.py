"""`python -m bench.signin_burst`: N different users (1,000 by default) sign in at once, each
from an address of their own, and none may get 429: the login throttles (per client address,
per account) must not slow legitimate users down.

The server runs with its default throttles (AUTHORIC_TOKEN_RATE_LIMIT and
AUTHORIC_LOGIN_ACCOUNT_LIMIT unset) and `AUTHORIC_TRUSTED_PROXIES=127.0.0.1`, so each request's
`X-Forwarded-For` names its user's own address, as behind a load balancer. The users are
written straight into the database with one Argon2id hash of the shared password (made with
the server's own hasher and parameters): creating 1,000 users through the API would hash 1,000
times before the measurement starts. Every sign-in still verifies the hash.

Prints the answers by status, the wall time from the first request to the last answer, and the
server's and PostgreSQL's CPU per sign-in.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import secrets
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
import httpx
from argon2 import PasswordHasher

from bench.harness import PostgresCpu, database, running_server, tree_cpu_seconds

PASSWORD = "correct horse battery staple"


async def add_users(db_url: str, app_uid: str, org_uid: str, count: int) -> list[str]:
    """`count` users, each a member of the org with no role, sharing one password hash."""
    password_hash = PasswordHasher().hash(PASSWORD)
    emails = [f"burst-{n}@bench.test" for n in range(count)]
    conn = await asyncpg.connect(db_url)
    try:
        users = [(uuid.uuid4(), email) for email in emails]
        await conn.executemany(
            "INSERT INTO authoric.users (uid, app_uid, email, password_hash, email_verified_at)"
            " VALUES ($1, $2, $3, $4, now())",
            [(uid, uuid.UUID(app_uid), email, password_hash) for uid, email in users])
        await conn.executemany(
            "INSERT INTO authoric.members (app_uid, org_uid, user_uid, roles)"
            " VALUES ($1, $2, $3, '{}')",
            [(uuid.UUID(app_uid), uuid.UUID(org_uid), uid) for uid, _ in users])
    finally:
        await conn.close()
    return emails


async def burst(url: str, app: str, emails: list[str]) -> tuple[collections.Counter[int], float]:
    limits = httpx.Limits(max_connections=len(emails), max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:
        async def sign_in(n: int, email: str) -> int:
            address = f"10.{n // 65536 % 256}.{n // 256 % 256}.{n % 256}"
            response = await client.post(f"/{app}/auth/token", headers={
                "X-Forwarded-For": address}, json={"email": email, "password": PASSWORD})
            return response.status_code

        started = time.monotonic()
        statuses = await asyncio.gather(*(sign_in(n, e) for n, e in enumerate(emails)))
        return collections.Counter(statuses), time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="bench.signin_burst", description=__doc__)
    ap.add_argument("--users", type=int, default=1000)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="authoric-burst-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)
        # The default throttles: the harness raises them for the other benchmarks.
        env = {"AUTHORIC_TRUSTED_PROXIES": "127.0.0.1", "AUTHORIC_TOKEN_RATE_LIMIT": "20",
               "AUTHORIC_LOGIN_ACCOUNT_LIMIT": "10"}
        with database(work) as db, running_server(work, db, env=env) as server:
            admin = httpx.Client(base_url=server.url, timeout=60,
                                 headers={"Authorization": f"Bearer {server.admin_token}"})
            app = f"burst_{secrets.token_hex(4)}"
            app_uid = admin.post("/admin/apps", json={"name": app}).json()["uid"]
            org_uid = admin.post(f"/admin/apps/{app}/orgs", json={"name": "burst"}).json()["uid"]
            emails = asyncio.run(add_users(db.url, app_uid, org_uid, args.users))
            postgres = PostgresCpu(db)
            cpu_before, pg_before = tree_cpu_seconds(server.pid), postgres.read()
            statuses, seconds = asyncio.run(burst(server.url, app, emails))
            server_cpu = tree_cpu_seconds(server.pid) - cpu_before
            pg_cpu = PostgresCpu.used(pg_before, postgres.read())
            if set(statuses) != {200}:
                errors = [line for line in server.log_path.read_text().splitlines()
                          if "Error" in line or "error" in line]
                print("server log, error lines (last 5):", *errors[-5:], sep="\n  ")
        ok = statuses.get(200, 0)
        print(f"{args.users} users signing in at once, each from its own address "
              f"(default throttles: 20 per address, 10 per account, per 60 s window)")
        print(f"answers: {dict(sorted(statuses.items()))}; {seconds:.1f} s from the first "
              f"request to the last answer")
        print(f"CPU per sign-in: server {server_cpu / max(ok, 1) * 1000:.1f} ms, "
              f"PostgreSQL {pg_cpu / max(ok, 1) * 1000:.1f} ms")
        return 0 if statuses.get(429, 0) == 0 and ok == args.users else 1


if __name__ == "__main__":
    sys.exit(main())
