"""``unsure run [snakemake arguments]``: check the config files, then run Snakemake with the same arguments.

Snakemake reads every ``--configfile`` while parsing its command line, before
any code of the workflow runs, and its loader evaluates YTE templates (a file
with ``__use_yte__: true`` runs the Python expressions in it), reports a YAML
syntax error or a ``!!python/...`` tag as "tab indentation" and a non-UTF-8 byte
as a bare ``UnicodeDecodeError``. The workflow cannot check a file earlier than
that, so this entry point does: it finds the config files the same Snakemake
command would read (each ``--configfile``/``--configfiles`` value, profiles
included, or else ``config/config.yaml`` in the working directory, ``-d``/``--directory``
or the current one), reads each with :func:`unsure.config.read_config_file`
(which evaluates nothing and names file:line:column or the byte offset), merges
them with any ``--config KEY=VALUE`` as Snakemake does and validates the result
as the workflow does (naming the config key). On a problem it prints the
problem and exits 2, having run nothing; otherwise it replaces itself with the
environment's ``snakemake`` and the unchanged arguments::

    unsure run all --configfile config/demo.yaml   # snakemake all --configfile config/demo.yaml, checked first
    unsure run --profile slurm all                  # the paper config, checked first
    python -m unsure.run -n                         # the same as `unsure run -n`, without the console script

Arguments Snakemake itself would refuse (and ``--help``) go straight to Snakemake.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unsure.config import ConfigError, deep_merge, parse_config, read_config_file, read_default_config

USAGE = "usage: unsure run [snakemake arguments]   (checks the config files, then runs snakemake with them)"


@dataclass(frozen=True)
class Invocation:
    """What a Snakemake command line reads as its config, as Snakemake's own parser sees it."""

    configfiles: tuple[Path, ...]
    """``--configfile`` values (relative to the current directory); empty: the workflow's default."""
    workdir: Path
    """``--directory``, or the current directory: where ``config/config.yaml`` and ``request_cache`` are."""
    overrides: dict[str, Any] = field(default_factory=dict)
    """``--config KEY=VALUE`` entries, merged over the files."""
    replace: bool = False
    """``--replace-workflow-config``: the overrides replace the default config instead of merging into it."""


def invocation(argv: Sequence[str]) -> Invocation | None:
    """The config-relevant arguments of ``snakemake argv`` (profiles applied, abbreviations and
    all, by Snakemake's own parser), or ``None`` when Snakemake would refuse the command line
    (or print its help): then Snakemake says so itself."""
    from snakemake.cli import parse_args
    from snakemake.cli import parse_config as parse_overrides

    quiet = io.StringIO()
    try:
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            _, args = parse_args(list(argv))
            overrides = parse_overrides(args.config)
    except (SystemExit, Exception):
        return None
    return Invocation(
        configfiles=tuple(Path(p) for p in args.configfile or ()),
        workdir=Path(args.directory) if args.directory else Path.cwd(),
        overrides=overrides,
        replace=bool(args.replace_workflow_config),
    )


def check(call: Invocation) -> None:
    """Read and validate the config ``call`` gives the workflow, as the workflow will.

    Raises:
        ConfigError: naming the file (and line, or byte offset) or the config key of the problem.
    """
    if call.configfiles:
        raw: dict[str, Any] = {}
        for path in call.configfiles:
            raw = deep_merge(raw, read_config_file(path))
        names = ", ".join(map(str, call.configfiles))
    else:
        default = read_default_config(call.workdir)
        raw = {} if call.replace and call.overrides else default
        names = str(call.workdir / "config" / "config.yaml")
    raw = deep_merge(raw, call.overrides)
    try:
        # relative paths in the config (request_cache) are the working directory's
        with contextlib.chdir(call.workdir) if call.workdir.is_dir() else contextlib.nullcontext():
            parse_config(raw)
    except ConfigError as err:
        raise ConfigError(f"{names}: {err}") from None


def snakemake_command() -> str:
    """The ``snakemake`` of this Python environment (the one the project is installed in), else the PATH's."""
    here = Path(sys.executable).with_name("snakemake")
    return str(here) if here.is_file() else "snakemake"


def run(argv: Sequence[str]) -> int:
    """Check the config of ``snakemake argv``; on a problem print it and return 2, else exec Snakemake."""
    call = invocation(argv)
    if call is not None:
        try:
            check(call)
        except ConfigError as err:
            sys.stderr.write(f"unsure run: {err}\nunsure run: nothing was run; fix the config and run again\n")
            return 2
    command = snakemake_command()
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvp(command, [command, *argv])
    return 0  # not reached: execvp replaces this process


def main(argv: Sequence[str] | None = None) -> int:
    """The ``unsure`` console script: ``unsure run [snakemake arguments]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["run"]:
        return run(args[1:])
    help_asked = args[:1] in (["-h"], ["--help"])
    (sys.stdout if help_asked else sys.stderr).write(f"{USAGE}\n")
    return 0 if help_asked else 2


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
