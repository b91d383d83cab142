"""Kept secrets are created once, whole, however many processes race to create them (as
`authoric serve --workers N` processes would on an empty data directory)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from authoric.auth.secrets import Secret, _kept

RACERS = 8


def _race(path: str, start: multiprocessing.synchronize.Barrier, out: multiprocessing.Queue) -> None:
    start.wait()
    secret = _kept(Path(path))
    out.put((secret.value, secret.created))


def test_eight_processes_racing_on_an_empty_directory_all_get_the_one_secret_one_created(
        tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    for round_ in range(3):
        path = tmp_path / f"round{round_}" / "jwt_secret"
        start, out = ctx.Barrier(RACERS), ctx.Queue()
        racers = [ctx.Process(target=_race, args=(str(path), start, out)) for _ in range(RACERS)]
        for p in racers:
            p.start()
        results = [out.get(timeout=120) for _ in racers]
        for p in racers:
            p.join(60)
        values = {value for value, _ in results}
        assert values == {path.read_text()}, "racers disagree, or read a half-written file"
        assert len(next(iter(values))) >= 43  # 32 random bytes, URL-safe base64
        assert sum(created for _, created in results) == 1
        assert [p.name for p in path.parent.iterdir()] == ["jwt_secret"]  # no temp files left


def test_a_kept_secret_is_read_back_not_replaced(tmp_path: Path) -> None:
    made = _kept(tmp_path / "admin_token")
    again = _kept(tmp_path / "admin_token")
    assert made.created and not again.created
    assert again == Secret(made.value, False, tmp_path / "admin_token")
    assert (tmp_path / "admin_token").stat().st_mode & 0o777 == 0o600
