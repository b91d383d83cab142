"""`bench.feed_profile`: a reader of the profile learns how much of a worker's busy time the
fan-out pass takes, and how much of the pass is system calls, compiled drivers or Python.
The split is read from py-spy's raw output; idle threads and the loop's wait are not work."""

from __future__ import annotations

from pathlib import Path

from bench.feed_profile import report, split, stop_of
from bench.profile import samples, summarize

ROOT = ["Server.run (uvicorn/server.py:86)", "Runner.run (asyncio/runners.py:118)"]
PASS = [*ROOT, "Relay._follow (authoric/changes/relay.py:227)",
        "Hub.dispatch (authoric/realtime/hub.py:411)"]


def sample(frames: list[str], n: int) -> str:
    """One line of py-spy's raw output: the stack, outermost first, and its count."""
    return f"{';'.join(frames)} {n}"


RAW = "\n".join([
    # The pass: a frame written to a socket, the judge's driver work, ours, the interpreter.
    sample([*PASS, "ChunkWriter.write_chunk (authoric/serving/wire.py:62)",
            "UVStream_write (loop.c:110085)", "write (libc.so.6)"], 30),
    sample([*PASS, "Connection._do_execute (asyncpg/connection.py:2066)",
            "CoreProtocol__bind_execute (protocol.c:55447)"], 10),
    sample([*PASS, "_rendered (authoric/realtime/judge.py:221)",
            "rfc3339 (authoric/catalog/types/builtin.py:39)"], 6),
    sample([*PASS, "Subscriber.offer (authoric/realtime/hub.py:97)"], 2),
    sample([*PASS, "Py_DECREF (object.h:537)"], 2),
    # The sequencer and the relay's callback are not the pass.
    sample([*ROOT, "Sequencer._lead (authoric/changes/sequencer.py:220)",
            "Sequencer.stamp (authoric/changes/sequencer.py:246)"], 25),
    sample([*ROOT, "Relay._notified (authoric/changes/relay.py:126)",
            "heard (authoric/changes/relay.py:90)"], 5),
    sample([*ROOT, "Loop__on_idle (loop.c:19387)", "uv__read (stream.c:1154)"], 20),
    # A stream's ping through its own task, and a REST write.
    sample([*ROOT, "RequestResponseCycle.run_asgi (uvicorn/protocols/http/httptools_impl.py:420)",
            "BodySend.__call__ (authoric/http/subscribe.py:60)"], 3),
    sample([*ROOT, "RequestResponseCycle.run_asgi (uvicorn/protocols/http/httptools_impl.py:420)",
            "create_row (authoric/http/table_routes.py:80)"], 7),
    # Waiting is not work: the loop's poll, and another thread on its lock.
    sample([*ROOT, "uv__io_poll (linux.c:1546)", "epoll_pwait (libc.so.6)"], 900),
    sample(["Thread._bootstrap (threading.py:1002)", "Condition.wait (threading.py:327)",
            "lock (libpython3.11.so.1.0)"], 800),
    "",
])


def test_a_reader_sees_the_workers_busy_samples_by_area_with_waiting_left_out() -> None:
    s = split(RAW.splitlines())
    assert s.busy == 110
    assert dict(s.areas) == {"the fan-out pass": 50, "the sequencer": 25,
                             "the relay outside its pass": 5, "the event loop's other work": 20,
                             "the streams' own tasks": 3, "other HTTP requests": 7}


def test_a_reader_sees_the_pass_split_into_system_calls_drivers_and_python() -> None:
    s = split(RAW.splitlines())
    assert dict(s.stops) == {"socket writes (system calls)": 30, "asyncpg, compiled": 10,
                             "Python: ours": 8, "the interpreter and C library": 2}
    assert s.ours.most_common(1) == [("rfc3339 (authoric/catalog/types/builtin.py:39)", 6)]


def test_innermost_frames_are_told_apart_by_where_their_code_lives() -> None:
    assert stop_of("read (libc.so.6)") == "socket reads (system calls)"
    assert stop_of("Connection.fetch (asyncpg/connection.py:717)") == "Python: asyncpg"
    assert stop_of("Starlette.__call__ (starlette/applications.py:96)") == "Python: other packages"
    assert stop_of("__init__ (<string>:3)") == "Python: other packages"
    assert stop_of("record_item_by_name (recordobj.c:439)") == "asyncpg, compiled"
    assert stop_of("uv__read (stream.c:1154)") == "uvloop, compiled"
    assert stop_of("task_step_impl (_asynciomodule.c:2704)") == "the interpreter and C library"


def test_the_report_gives_shares_of_the_worker_and_of_its_pass() -> None:
    text = report(7, split(RAW.splitlines()), rate_hz=200, seconds=40)
    assert text.splitlines()[0] == "worker 7: 110 busy samples (0.55 s sampled in 40 s)"
    assert "      50   45.5%  the fan-out pass" in text
    assert "        30   60.0%  socket writes (system calls)" in text
    assert report(8, split([]), 200, 40) == "worker 8: no busy sample"


def test_both_profiles_read_py_spys_output_alike_and_the_request_profile_still_sums_it(
        tmp_path: Path) -> None:
    assert list(samples(["a (m.py:1);b (m.py:2) 3\n", "\n", "a (m.py:1) 1"])) == [
        (["a (m.py:1)", "b (m.py:2)"], 3), (["a (m.py:1)"], 1)]
    collapsed = tmp_path / "stacks.txt"
    collapsed.write_text("a (m.py:1);b (m.py:2) 3\na (m.py:1) 1\n")
    text = summarize(collapsed, top=5)
    assert text.splitlines()[0] == "4 samples"
    assert "   75.0%  b (m.py)" in text  # own time
    assert "  100.0%  a (m.py)" in text  # including callees
