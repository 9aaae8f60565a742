"""Rule jobs of a local run start from a process that has already imported their libraries.

A job that loads a model spends about 8 s importing torch, transformers and
pandas before its first line of work (2 cores), and the demo and the CI shadow
run 100-150 such jobs. In a local run the controller starts one server
(:func:`start`); a rule script's first statement, :func:`hand_off`, sends the
job to it. The server first imports every module that earlier jobs imported,
then forks a child that runs the script with the job's working directory,
environment, arguments, standard streams and thread count, in the job's process
group: signals sent to the group (a Ctrl-C, Ctrl-Z, ``kill -STOP -PGID``) reach
the child as they would the job. The job's process leaves the group, passes on
the signals sent to it alone (Snakemake's SIGTERM), ends with the child's exit
status, and takes the child with it when it is killed. The server itself runs
in the run's process group (see :class:`Running`).

A job runs on its own (a cold start) when there is no server (SLURM and other
executors, dry runs, a server still starting), when its environment differs
from the server's in more than thread counts and temporary folders, when it
runs another Python, or when a library file the server loaded has changed.
Setting ``UNSURE_FORKSERVER=off`` turns it off.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import json
import os
import runpy
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Any

ADDRESS = "UNSURE_FORKSERVER"
"""The environment variable that names the server's socket (``off``: no server)."""

PER_JOB = frozenset(
    {
        # Snakemake sets these for each job from its thread count and tmpdir resource
        *("OMP_NUM_THREADS", "GOTO_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"),
        *("VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "TMPDIR", "TMP", "TEMP", "TEMPDIR"),
        *("COLUMNS", "LINES"),  # the terminal's size, which Python sets when it is read
        *("_", "SHLVL", "PWD", "OLDPWD"),  # set by the shell that Snakemake starts each job's command in
    }
)
"""Environment variables a served job may set differently from the server: the child applies them
(the thread counts to torch and the BLAS libraries, the temporary folder to ``tempfile``)."""

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
"""Signals the job's process passes on to the child that runs the job."""

_HEADER = struct.Struct("!I")
_served = False
"""True in a child of the server: :func:`hand_off` then lets the script run on."""


def hand_off() -> None:
    """Run this job in a child of the local run's server, if there is one, and exit with its status.

    Returns at once (the job runs here, cold) where the server cannot serve it.
    """
    address = os.environ.get(ADDRESS, "off")
    if _served or address == "off" or "SLURM_JOB_ID" in os.environ:
        return
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.connect(address)
    except OSError:  # not listening yet (still importing), or gone
        client.close()
        return
    ignored = [sig for sig in SIGNALS if signal.getsignal(sig) == signal.SIG_IGN]  # the child ignores them too
    request = json.dumps(
        {
            "argv": sys.argv,
            "cwd": os.getcwd(),
            "env": dict(os.environ),
            "python": sys.executable,
            "ignored": ignored,
            "group": os.getpgrp(),
        }
    ).encode()
    child: list[int] = []  # its pid, once the server has said it
    early: list[int] = []  # signals that came before

    def pass_on(signum: int, _frame: object) -> None:
        if child:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child[0], signum)
        else:
            early.append(signum)

    before = {sig: signal.signal(sig, pass_on) for sig in SIGNALS if sig not in ignored}
    replies = client.makefile("r", encoding="utf-8")
    try:
        socket.send_fds(client, [_HEADER.pack(len(request))], [0, 1, 2])
        client.sendall(request)
        first = replies.readline().split(" ", 1)
    except OSError:
        first = [""]
    if first[0] != "pid":
        client.close()
        for sig, handler in before.items():
            signal.signal(sig, handler)
        if first[0] == "cold" and len(first) > 1:
            print(f"unsure.forkserver: this job starts on its own: {first[1].strip()}", file=sys.stderr)
        for signum in early:  # as if they came now, to the job that runs here
            signal.raise_signal(signum)
        return
    child.append(int(first[1]))
    with contextlib.suppress(OSError):  # the child took this process's place in its process group:
        if os.getpgid(child[0]) == os.getpgrp():  # signals sent to the group (a Ctrl-C, killpg) reach it
            os.setpgid(0, 0)  # there, and only those sent to this process are passed on
    for signum in early:
        pass_on(signum, None)
    end = replies.readline().split()
    if len(end) != 2:
        print(f"unsure.forkserver: lost the server while process {child[0]} ran this job", file=sys.stderr)
        os._exit(1)
    kind, value = end[0], int(end[1])
    if kind == "signal":  # end as the child did, so that the caller sees the same signal
        with contextlib.suppress(OSError):  # SIGKILL's cannot be set, nor need it
            signal.signal(value, signal.SIG_DFL)
        os.kill(os.getpid(), value)
        os._exit(128 + value)
    os._exit(value)


class Running:
    """A started server: its process and socket; :meth:`stop` ends it once its jobs have ended."""

    def __init__(self, workdir: str | os.PathLike[str]) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="unsure-fork-"))  # short: a socket path has at most 107 bytes
        self.address = str(self.folder / "socket")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "unsure.forkserver", self.address],
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            # In the run's process group, which then never holds a process (a job's child) whose parent
            # is outside it: a stopped group that loses its last such process is orphaned, and the
            # kernel sends it SIGHUP and SIGCONT, ending a run stopped with `kill -STOP -PGID`.
            # It ignores the group's Ctrl-C and hang-up (its children do not) and ends with the run.
        )

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.terminate()  # it stops listening and ends when its last child has
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        for leftover in self.folder.glob("*"):
            leftover.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.folder.rmdir()


def start(workdir: str | os.PathLike[str] = ".") -> Running | None:
    """Start the server for a local run, name it in this process's environment (which the jobs
    inherit) and stop it when this process ends. None where ``UNSURE_FORKSERVER=off``."""
    if os.environ.get(ADDRESS) == "off":
        return None
    server = Running(workdir)
    os.environ[ADDRESS] = server.address
    atexit.register(server.stop)
    return server


def served() -> bool:
    """Whether this process is a child of the server, running a job handed to it."""
    return _served


class _Server:
    """The listening process: it imports what jobs import, forks a child per job and reports each end."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.folder = Path(address).parent
        self.parent = os.getppid()
        self.env = dict(os.environ)
        self.learned: dict[str, None] = {}
        """Modules the served jobs imported, in the order they did: the server imports them before each fork."""
        self.unimportable: set[str] = set()
        self.loaded: dict[str, float] = {}
        """Library file -> its modification time when the server imported it."""
        self.children: dict[int, socket.socket] = {}
        self.stopping = False
        self.events = selectors.DefaultSelector()

    def serve(self) -> None:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.address)
        listener.listen(64)
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stopping", True))
        for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_IGN)
        self.events = selectors.DefaultSelector()
        self.events.register(listener, selectors.EVENT_READ)
        self.events.register(wake_r, selectors.EVENT_READ)
        self._note_loaded()
        while True:
            for key, _ in self.events.select(timeout=1.0):
                if key.fileobj is listener and not self.stopping:
                    conn, _ = listener.accept()
                    self._accept(conn, (listener, wake_r, wake_w))
                elif key.fileobj == wake_r:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_r, 512)
                elif key.data is not None:  # a job's process closed its end before its child ended:
                    self.events.unregister(key.fileobj)  # it was killed (SIGKILL), and so is the child
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(key.data, signal.SIGKILL)
            self._reap()
            if os.getppid() != self.parent:  # the controller is gone: serve no more jobs
                self.stopping = True
            if self.stopping and not self.children:
                listener.close()
                with contextlib.suppress(OSError):
                    os.unlink(self.address)
                return

    def _accept(self, conn: socket.socket, private: tuple[Any, ...]) -> None:
        try:
            conn.settimeout(30)
            head, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 3)
            (size,) = _HEADER.unpack(head)
            body = b""
            while len(body) < size:
                more = conn.recv(size - len(body))
                if not more:
                    raise ConnectionError("the job's process closed its request")
                body += more
            request = json.loads(body)
        except (OSError, ValueError, struct.error):
            conn.close()
            return
        try:
            reason = self._why_cold(request)
            if reason:
                conn.sendall(f"cold {reason}\n".encode())
                conn.close()
                return
            self._import_learned()
            gc.collect()
            gc.freeze()  # the children's collections skip the server's objects (and copy fewer pages)
            pid = os.fork()
            if pid == 0:
                _run_child(conn, request, fds, (*private, *self.children.values(), self.events), self.folder)
            with contextlib.suppress(OSError):  # the job's process group (the child does the same: no race)
                os.setpgid(pid, request["group"])
            self.children[pid] = conn
            conn.sendall(f"pid {pid}\n".encode())
            self.events.register(conn, selectors.EVENT_READ, data=pid)  # the job's process sends no more
        except OSError:
            conn.close()
        finally:
            for fd in fds:
                os.close(fd)

    def _why_cold(self, request: dict[str, Any]) -> str:
        if request["python"] != sys.executable:
            return f"it runs {request['python']}, the server {sys.executable}"
        env = request["env"]
        differ = sorted(
            k
            for k in env.keys() | self.env.keys()
            if k not in PER_JOB and k != ADDRESS and env.get(k) != self.env.get(k)
        )
        if differ:
            return f"its environment differs from the run's in {', '.join(differ)}"
        changed = [f for f, mtime in self.loaded.items() if _mtime(f) != mtime]
        if changed:
            return f"{changed[0]} changed after the run started"
        return ""

    def _import_learned(self) -> None:
        for name in list(self.learned):
            if name not in sys.modules:
                try:
                    importlib.import_module(name)
                except Exception:  # made at run time, not importable by name: the jobs make their own
                    del self.learned[name]
                    self.unimportable.add(name)
        self._note_loaded()

    def _note_loaded(self) -> None:
        for name, module in list(sys.modules.items()):
            path = getattr(module, "__file__", None)
            if name.split(".")[0] == "unsure" and path and path not in self.loaded:
                self.loaded[path] = _mtime(path)

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is None:
                continue
            with contextlib.suppress(KeyError):
                self.events.unregister(conn)
            code = os.waitstatus_to_exitcode(status)
            with contextlib.suppress(OSError):
                conn.sendall((f"signal {-code}\n" if code < 0 else f"exit {code}\n").encode())
            conn.close()
            learned = self.folder / f"imports-{pid}.json"
            with contextlib.suppress(OSError, ValueError):
                names = json.loads(learned.read_text())
                self.learned.update(dict.fromkeys(n for n in names if n not in self.unimportable))
            learned.unlink(missing_ok=True)


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return -1.0


def _run_child(
    conn: socket.socket, request: dict[str, Any], fds: list[int], private: tuple[Any, ...], folder: Path
) -> None:
    """Become the job: its streams, folder, environment and arguments; run its script; say what it imported; exit."""
    global _served
    code = 1
    try:
        with contextlib.suppress(OSError):
            os.setpgid(0, request["group"])
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, *SIGNALS):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for sig in request.get("ignored", []):
            signal.signal(sig, signal.SIG_IGN)
        for item in private:
            with contextlib.suppress(OSError):
                item.close() if isinstance(item, socket.socket | selectors.BaseSelector) else os.close(item)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = list(request["argv"])
        sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))  # as for `python script.py`
        tempfile.tempdir = None  # read TMPDIR again
        _apply_threads(os.environ.get("OMP_NUM_THREADS"))
        conn.close()  # the server watches the job's process on its end
        before = set(sys.modules)
        _served = True
        try:
            runpy.run_path(sys.argv[0], run_name="__main__")
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
            if not isinstance(stop.code, int | None):
                print(stop.code, file=sys.stderr)
        except KeyboardInterrupt as stop:
            _print_from_script(stop)
            code = -signal.SIGINT
        except BaseException as err:
            _print_from_script(err)
            code = 1
        new = [n for n in sys.modules if n not in before and n not in ("__main__", "__mp_main__")]
        with contextlib.suppress(OSError):
            (folder / f"imports-{os.getpid()}.json").write_text(json.dumps(new))
        _finalize()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        if code < 0:
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        os._exit(code if code >= 0 else 1)


def _finalize() -> None:
    """What the interpreter does when a script ends, in its order: join the threads that are not
    daemons and run ``threading``'s exit hooks (a joblib/loky worker pool shuts down there), then
    the ``atexit`` functions (``multiprocessing`` joins its children there)."""
    with contextlib.suppress(Exception):
        threading._shutdown()  # type: ignore[attr-defined]
    with contextlib.suppress(Exception):
        atexit._run_exitfuncs()


def _print_from_script(err: BaseException) -> None:
    """The traceback a cold start prints: from the script's frame on, not the server's."""
    tb = err.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != sys.argv[0]:
        tb = tb.tb_next
    traceback.print_exception(type(err), err, tb or err.__traceback__)


def _apply_threads(value: str | None) -> None:
    """The job's thread count, which the libraries the server imported read from the server's environment."""
    if not value or not value.isdigit():
        return
    n = int(value)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(n)
    with contextlib.suppress(ImportError):
        from threadpoolctl import threadpool_limits

        threadpool_limits(n)


if __name__ == "__main__":  # run by start(): the children must see this module under its own name
    from unsure.forkserver import _Server as Server

    Server(sys.argv[1]).serve()
