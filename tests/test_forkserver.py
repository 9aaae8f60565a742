"""A local run's fork server: a job handed to it behaves as the same job started on its own."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from unsure import forkserver

REPO = Path(__file__).resolve().parents[1]
CHANGES_PER_PHASE = "PYTEST_CURRENT_TEST"
"""pytest's own variable, which differs between setup (when the server starts) and the test."""

JOB = """
import json, os, sys, time
from unsure.forkserver import hand_off

hand_off()

was_imported = "xml.dom.minidom" in sys.modules
import xml.dom.minidom

print(json.dumps({"ppid": os.getppid(), "pid": os.getpid(), "cwd": os.getcwd(), "argv": sys.argv[1:],
                  "threads": os.environ.get("OMP_NUM_THREADS"), "was_imported": was_imported}), flush=True)
print("to stderr", file=sys.stderr, flush=True)
what = sys.argv[1] if len(sys.argv) > 1 else ""
if what == "fail":
    raise ValueError("the job's own error")
if what == "wait":
    try:
        print("waiting", flush=True)
        time.sleep(60)
    except KeyboardInterrupt:
        with open("interrupted", "a") as f:
            f.write("x")  # a second interrupt (passed on twice) would end the job before this line
        time.sleep(0.5)
        raise
sys.exit(int(what) if what.isdigit() else 0)
"""


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[forkserver.Running]:
    monkeypatch.delenv(CHANGES_PER_PHASE, raising=False)
    running = forkserver.Running(tmp_path)
    monkeypatch.setenv(forkserver.ADDRESS, running.address)
    deadline = time.monotonic() + 60
    while not Path(running.address).exists():
        assert time.monotonic() < deadline, "the server did not listen within 60 s"
        assert running.process.poll() is None, "the server ended"
        time.sleep(0.05)
    yield running
    running.stop()
    assert running.process.returncode == 0


@pytest.fixture
def job(tmp_path: Path) -> Path:
    path = tmp_path / "job.py"
    path.write_text(JOB)
    return path


def _env(**more: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != CHANGES_PER_PHASE}, **more}


def _run(job: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    work = job.parent / "work"
    work.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, str(job), *args],
        cwd=work,
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _said(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    said: dict[str, object] = json.loads(done.stdout.splitlines()[0])
    return said


def test_a_handed_job_runs_in_a_child_of_the_server_with_the_jobs_streams_folder_arguments_and_status(
    server: forkserver.Running, job: Path
) -> None:
    done = _run(job, "3", OMP_NUM_THREADS="1")
    said = _said(done)
    assert said["ppid"] == server.process.pid, done.stderr
    assert said["ppid"] == server.process.pid
    assert said["cwd"] == str(job.parent / "work")
    assert said["argv"] == ["3"]
    assert said["threads"] == "1"  # Snakemake's per-job thread count reaches the child
    assert done.stderr == "to stderr\n"
    assert done.returncode == 3


def test_the_server_imports_what_earlier_jobs_imported_before_it_forks_the_next(
    server: forkserver.Running, job: Path
) -> None:
    first, second = _said(_run(job)), _said(_run(job))
    assert first["ppid"] == second["ppid"] == server.process.pid
    assert (first["was_imported"], second["was_imported"]) == (False, True)


def test_a_job_ends_as_a_script_does_its_threads_joined_and_its_worker_pools_shut_down(
    server: forkserver.Running, tmp_path: Path
) -> None:
    """A joblib (loky) pool shuts down in threading's exit hooks, which run before atexit's: a job
    that used one hung at its end when only the atexit functions ran."""
    script = tmp_path / "pool.py"
    script.write_text(
        "import os, threading, time\n"
        "from unsure.forkserver import hand_off\n\n"
        "hand_off()\n\n"
        "from joblib import Parallel, delayed\n"
        "print(os.getppid(), sum(Parallel(n_jobs=2)(delayed(abs)(-i) for i in range(4))), flush=True)\n"
        "threading.Thread(target=lambda: (time.sleep(0.5), open('thread-ran', 'w').close())).start()\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(server.process.pid), "6"]
    assert (tmp_path / "thread-ran").exists()


def test_a_failing_job_shows_its_own_traceback_and_exits_1(server: forkserver.Running, job: Path) -> None:
    done = _run(job, "fail")
    assert _said(done)["ppid"] == server.process.pid
    assert done.returncode == 1
    assert done.stderr.rstrip().endswith("ValueError: the job's own error")
    assert "forkserver" not in done.stderr and "runpy" not in done.stderr


def _sigint(handler: signal.Handlers) -> None:
    """In the job's process before it starts: SIGINT as a test asks, and not blocked. A pytest-xdist
    worker ignores SIGINT, and a child inherits that (the job would then ignore a Ctrl-C, rightly)."""
    signal.signal(signal.SIGINT, handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _start(job: Path, ignore_sigint: bool = False) -> tuple[subprocess.Popen[str], dict[str, object]]:
    work = job.parent / "work"
    work.mkdir(exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, str(job), "wait"],
        cwd=work,
        env=_env(),
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=partial(_sigint, signal.SIG_IGN if ignore_sigint else signal.SIG_DFL),
    )
    assert proc.stdout is not None
    said: dict[str, object] = json.loads(proc.stdout.readline())
    assert proc.stdout.readline() == "waiting\n"
    return proc, said


def test_a_ctrl_c_reaches_the_job_once_and_its_process_ends_as_the_job_did(
    server: forkserver.Running, job: Path
) -> None:
    proc, said = _start(job)
    assert said["ppid"] == server.process.pid
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == -signal.SIGINT
    assert (job.parent / "work" / "interrupted").exists()


def test_signals_to_the_jobs_process_group_reach_the_job_once_and_stop_it_too(
    server: forkserver.Running, job: Path
) -> None:
    """As under Snakemake: the job's process is a member of the run's process group (here a shell's).
    A SIGSTOP to the group stops the job; a SIGINT to it interrupts the job once."""
    work = job.parent / "work"
    work.mkdir()
    group = subprocess.Popen(
        ["sh", "-c", f"{sys.executable} {job} wait; :"],  # `; :` keeps sh the group's leader, python a member
        cwd=work,
        env=_env(),
        stdout=subprocess.PIPE,
        text=True,
        process_group=0,
        preexec_fn=partial(_sigint, signal.SIG_DFL),
    )
    assert group.stdout is not None
    said = json.loads(group.stdout.readline())
    assert group.stdout.readline() == "waiting\n"
    child = said["pid"]
    assert said["ppid"] == server.process.pid and os.getpgid(child) == group.pid
    os.killpg(group.pid, signal.SIGSTOP)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}/stat").read_text().split()[2] != "T":
        assert time.monotonic() < deadline, "the job ran on after its group was stopped"
        time.sleep(0.05)
    os.killpg(group.pid, signal.SIGCONT)
    os.killpg(group.pid, signal.SIGINT)  # to sh as well, which then ends as its job did
    assert group.wait(timeout=30) == -signal.SIGINT
    assert (work / "interrupted").read_text() == "x"


CONTROLLER = """
import subprocess, sys, time
from pathlib import Path
from unsure import forkserver

server = forkserver.start()
while not Path(server.address).exists():
    time.sleep(0.05)
job = subprocess.run([sys.executable, sys.argv[1], "wait"])
print(job.returncode, flush=True)
"""


def test_a_stopped_run_stays_stopped_and_alive_when_a_served_job_ends(job: Path, tmp_path: Path) -> None:
    """A run started as its own session (``setsid``, ``nohup``, a test's ``start_new_session``) is
    stopped (``kill -STOP -PGID``) while a served job ends. The kernel sends SIGHUP and SIGCONT to a
    stopped process group that becomes orphaned: had the job's child a parent outside the group
    (the server in a group of its own), its end would orphan the run's group and kill the controller."""
    controller = tmp_path / "controller.py"
    controller.write_text(CONTROLLER)
    work = job.parent / "work"
    work.mkdir()
    env = {k: v for k, v in _env().items() if k != forkserver.ADDRESS}
    run = subprocess.Popen(
        [sys.executable, str(controller), str(job)],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=partial(_sigint, signal.SIG_DFL),
    )
    try:
        assert run.stdout is not None
        said = json.loads(run.stdout.readline())
        assert run.stdout.readline() == "waiting\n"
        child = int(str(said["pid"]))
        assert os.getpgid(child) == run.pid
        os.killpg(run.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while _state(child) != "T":
            assert time.monotonic() < deadline, "the job ran on after its group was stopped"
            time.sleep(0.05)
        os.kill(child, signal.SIGKILL)  # the served job ends while its run is stopped
        time.sleep(1)
        assert _state(run.pid) == "T", "the stopped controller was woken or killed when its job ended"
        os.killpg(run.pid, signal.SIGCONT)
        assert run.stdout.readline() == f"{-signal.SIGKILL}\n"
        assert run.wait(timeout=30) == 0
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            os.killpg(run.pid, signal.SIGCONT)
            run.wait()


def _state(pid: int) -> str:
    """A process's state letter from ``/proc`` (``T`` stopped, ``Z`` ended, unreaped); ``gone`` when reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return "gone"


def test_a_signal_the_jobs_process_ignores_is_ignored_by_the_job(server: forkserver.Running, job: Path) -> None:
    proc, said = _start(job, ignore_sigint=True)
    assert said["ppid"] == server.process.pid
    proc.send_signal(signal.SIGINT)
    time.sleep(1)
    assert proc.poll() is None and not (job.parent / "work" / "interrupted").exists()
    proc.terminate()
    assert proc.wait(timeout=30) == -signal.SIGTERM


def test_a_killed_job_process_takes_its_child_with_it(server: forkserver.Running, job: Path) -> None:
    proc, said = _start(job)
    child = said["pid"]
    assert isinstance(child, int) and said["ppid"] == server.process.pid
    proc.kill()
    proc.wait(timeout=30)
    deadline = time.monotonic() + 10
    while _alive(child):
        assert time.monotonic() < deadline, "the child outlived the job's process"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"  # a zombie has ended
    except (FileNotFoundError, ProcessLookupError):  # reaped, maybe while being read
        return False


def test_a_job_whose_environment_differs_starts_on_its_own_and_says_why(server: forkserver.Running, job: Path) -> None:
    done = _run(job, NOT_IN_THE_RUN="1")
    assert _said(done)["ppid"] == os.getpid()  # started by this test, not by the server
    assert "starts on its own: its environment differs from the run's in NOT_IN_THE_RUN" in done.stderr
    assert done.returncode == 0


def test_without_a_server_a_job_starts_on_its_own(job: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(forkserver.ADDRESS, "off")
    done = _run(job, "4")
    assert _said(done)["ppid"] == os.getpid()
    assert (done.returncode, done.stderr) == (4, "to stderr\n")


def test_every_rule_script_hands_its_job_off_before_it_imports_anything_else() -> None:
    for path in sorted((REPO / "scripts").rglob("*.py")):
        body = ast.parse(path.read_text()).body
        docstring, first, second = body[0], body[1], body[2]
        assert isinstance(docstring, ast.Expr) and isinstance(docstring.value, ast.Constant), path
        assert isinstance(first, ast.ImportFrom) and first.module == "unsure.forkserver", path
        assert ast.unparse(second) == "hand_off()", path
