"""How long `make demo` takes here: wall time, CPU time, job-seconds per rule, the zoo's training.

    .venv/bin/python -m bench.demo [--out docs/demo-time.md] [--keep DIR]

Runs ``/usr/bin/time -v make demo`` in a fresh ``git clone`` of this checkout's
HEAD (its installed ``.venv`` linked in, so the install is not timed; the
clone's own ``lib`` first on ``PYTHONPATH``), after measuring the machine's
matmul rate (machines differ by day, so a time means little without it). Writes
the measurement as Markdown (``docs/demo.md`` includes it), so that no demo time
in the docs is pasted by hand. Takes as long as the demo: about 12 minutes on 2
idle cores.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
STAMP = ".venv/.installed"


def matmul_rates(runs: int = 3, threads: int = 2) -> list[float]:
    """GFLOP/s of 2048 x 2048 float32 matmuls (``bench.engine.matmul_flops``) on ``threads`` threads."""
    from bench.engine import matmul_flops

    torch.set_num_threads(threads)
    return [matmul_flops() / 1e9 for _ in range(runs)]


def run_demo(clone: Path) -> str:
    """``/usr/bin/time -v make demo`` in ``clone``; its whole output (Snakemake's log and time's report)."""
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    (clone / ".venv").symlink_to(REPO / ".venv")
    (REPO / STAMP).touch()  # installed already: make would reinstall for the clone's newer pyproject.toml
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(clone / "lib"), str(clone / "tools")])}
    done = subprocess.run(
        ["/usr/bin/time", "-v", "make", "demo"], cwd=clone, env=env, capture_output=True, text=True, check=False
    )
    output = done.stdout + done.stderr
    (clone / "demo.log").write_text(output, encoding="utf-8")
    if done.returncode != 0:
        raise SystemExit(f"make demo failed ({done.returncode}); its output is in {clone / 'demo.log'}")
    return output


def time_report(output: str) -> dict[str, float]:
    """Wall, user and system seconds and peak memory (GiB) from ``/usr/bin/time -v``."""

    def field(name: str) -> str:
        found = re.search(rf"^\s*{re.escape(name)}: (.+)$", output, re.M)
        if found is None:
            raise ValueError(f"/usr/bin/time -v printed no '{name}'")
        return found.group(1).strip()

    clock = [float(p) for p in field("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")]
    wall = sum(v * 60**i for i, v in enumerate(reversed(clock)))
    return {
        "wall": wall,
        "user": float(field("User time (seconds)")),
        "system": float(field("System time (seconds)")),
        "rss_gib": float(field("Maximum resident set size (kbytes)")) / 2**20,
    }


STAMP_LINE = re.compile(r"^\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]$")
START = re.compile(r"^(?:local)?rule (\w+):$")
JOBID = re.compile(r"^\s+jobid: (\d+)$")
FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)$")


def job_seconds(log: str) -> dict[str, tuple[int, float]]:
    """Per rule, its jobs and their seconds from start to finish, read from Snakemake's log."""
    started: dict[str, datetime] = {}
    per_rule: dict[str, list[float]] = defaultdict(list)
    stamp: datetime | None = None
    rule: str | None = None
    for line in log.splitlines():
        if m := STAMP_LINE.match(line):
            stamp = datetime.strptime(" ".join(m.group(1).split()), "%a %b %d %H:%M:%S %Y")
        elif m := START.match(line):
            rule = m.group(1)
        elif (m := JOBID.match(line)) and rule is not None and stamp is not None:
            started[m.group(1)] = stamp
            rule = None
        elif (m := FINISHED.match(line)) and stamp is not None and m.group(1) in started:
            per_rule[m.group(2)].append((stamp - started.pop(m.group(1))).total_seconds())
    return {r: (len(s), sum(s)) for r, s in per_rule.items()}


TRAINED = re.compile(r"trained \S+ on (.+?) \((\d+) examples.*?\) in ([\d.]+) s: (\d+) steps")


def zoo_training(logs: Path) -> list[tuple[str, str, float, int]]:
    """Per zoo model trained: its studies, seconds and steps (from its build log)."""
    out = []
    for path in sorted(logs.glob("*.log")):
        if m := TRAINED.search(path.read_text(encoding="utf-8")):
            out.append((path.stem, m.group(1), float(m.group(3)), int(m.group(4))))
    return out


def report(
    rates: list[float],
    times: dict[str, float],
    jobs: dict[str, tuple[int, float]],
    zoo: list[tuple[str, str, float, int]],
    commit: str,
) -> str:
    """The measurement as Markdown."""
    total = sum(s for _, s in jobs.values())
    ranked = sorted(jobs.items(), key=lambda kv: -kv[1][1])
    top, rest = ranked[:12], [n_s for _, n_s in ranked[12:]]
    lines = [
        f"`make demo` in a fresh clone of `{commit}`, measured {time.strftime('%Y-%m-%d')} by "
        "`.venv/bin/python -m bench.demo` (`/usr/bin/time -v make demo`, the install not timed, report included) "
        f"on {os.cpu_count()} cores ({_cpu_model()}), matmul {min(rates):.0f}-{max(rates):.0f} GFLOP/s "
        "(2048 x 2048 float32, 2 threads, three runs):",
        "",
        "| wall | user CPU | system CPU | peak memory | jobs | job-seconds |",
        "|---|---|---|---|---|---|",
        f"| {_clock(times['wall'])} | {_clock(times['user'])} ({times['user']:.0f} s) | {times['system']:.0f} s "
        f"| {times['rss_gib']:.1f} GiB | {sum(n for n, _ in jobs.values())} | {total:.0f} |",
        "",
        "Job-seconds per rule (start to finish, two jobs at a time), the largest first:",
        "",
        "| rule | jobs | job-seconds | share |",
        "|---|---|---|---|",
    ]
    lines += [f"| `{name}` | {n} | {s:.0f} | {s / total:.0%} |" for name, (n, s) in top]
    rest_s = sum(s for _, s in rest)
    lines.append(f"| {len(rest)} other rules | {sum(n for n, _ in rest)} | {rest_s:.0f} | {rest_s / total:.0%} |")
    if zoo:
        lines += [
            "",
            "The zoo's training (each model on one thread, two side by side):",
            "",
            "| model | studies | steps | seconds |",
            "|---|---|---|---|",
        ]
        lines += [f"| {m} | {s} | {steps} | {sec:.0f} |" for m, s, sec, steps in zoo]
    return "\n".join(lines) + "\n"


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)} min {seconds % 60:.0f} s"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "CPU model unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the Markdown here (default: print it)")
    parser.add_argument("--keep", type=Path, help="run in this new folder and keep it (default: a temporary one)")
    args = parser.parse_args(argv)
    if not (REPO / STAMP).is_file():
        raise SystemExit(f"no installed {REPO / '.venv'}: run `make {STAMP}` first (the install is not timed)")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    rates = matmul_rates()
    with tempfile.TemporaryDirectory(prefix="demo-") as tmp:
        clone = args.keep or Path(tmp) / "clone"
        output = run_demo(clone)
        text = report(
            rates, time_report(output), job_seconds(output), zoo_training(clone / "results/logs/models"), commit
        )
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
