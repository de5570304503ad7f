"""The one protocol of the programs that run on another host: how one is launched, how its result is read, and
how its exit code is mapped.

- `Program`: each program's module; `command_line` the one `python -m n8n_sizer.remote.<program>` string.
- `run(host, program, args, model)`: run it on a `hosts.host.Host` (this machine, or over SSH through Fabric),
  read its last stdout line as JSON into `model` (a pydantic model) or plain JSON; a non-zero exit is the host's
  one error shape (`hosts.host.command_error`), exit 2 named as a refused input.
- `serve(app, prog, argv)`: a program's side: run the typer app, print what the command returned as JSON on the
  last line and exit 0; `InputError` (and a usage error) is one line on stderr and exit 2, `RemoteError` (and
  the kinds the program names) one line and exit 1.
"""

from __future__ import annotations

import enum
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from n8n_sizer.errors import EXIT_INPUT, EXIT_REMOTE, InputError, RemoteError

M = TypeVar("M", bound=BaseModel)
PACKAGE = "n8n_sizer.remote"


class Program(enum.Enum):
    """A program that runs over there; its value is its module under `n8n_sizer.remote`."""

    NATIVE_STACK = "native_stack"
    INSTALL_N8N = "install_n8n"
    LAB_DATA = "lab_data"
    LAB_N8N = "lab_n8n"
    LAB_INGEST = "lab_ingest"
    LAB_AGENT = "lab_agent"
    LOAD_AGENT = "load_agent"

    @property
    def module(self) -> str:
        return f"{PACKAGE}.{self.value}"


def command_line(program: Program, args: Sequence[str], python: str | None = None) -> str:
    """The shell line that runs `program` with `args` (each quoted) under `python`. Without one: this
    interpreter, importing this very package (PYTHONPATH), for a host that shares this machine's files (a
    loopback SSH host), so the code over there is the code that launched it, not another install's."""
    line = " ".join(shlex.quote(w) for w in [python or sys.executable, "-m", program.module, *args])
    if python is None:
        line = f"PYTHONPATH={shlex.quote(str(Path(__file__).resolve().parents[2]))} {line}"
    return line


def last_json(stdout: str) -> Any:
    """The program's result: its last non-empty stdout line as JSON (ValueError when there is none)."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise ValueError("no output")
    return json.loads(lines[-1])


def run(
    host,
    program: Program,
    args: Sequence[str],
    model: type[M] | None = None,
    *,
    python: str | None = None,
    timeout_s: float = 120.0,
    check: bool = True,
) -> Any:
    """Run `program` on `host` and return its result, parsed into `model` when given. With `check=False` a
    non-zero exit is returned as whatever it printed (None when it printed no result)."""
    from n8n_sizer.hosts.host import HostError, command_error

    line = command_line(program, args, python)
    res = host.run(line, timeout_s=timeout_s, check=False)
    if check and res.exit_code != 0:
        why = "the program refused its input" if res.exit_code == EXIT_INPUT else ""
        raise command_error(host.name, line, res.exit_code, res.stderr, why)
    try:
        doc = last_json(res.stdout)
        return doc if model is None else model.model_validate(doc)
    except (ValueError, ValidationError):
        if not check:
            return None
        tail = " ".join(res.stdout.split())[-200:]
        raise HostError(f"{host.name}: `{program.value} {' '.join(args[:1])}` printed no result: {tail!r}") from None


def _dump(result: Any) -> str:
    if isinstance(result, BaseModel):
        return result.model_dump_json()
    return json.dumps(result)


class ExitWith:
    """A result printed like any other, with an exit code other than 0 (e.g. `status`: 1 unless all is healthy)."""

    def __init__(self, result: Any, exit_code: int) -> None:
        self.result, self.exit_code = result, exit_code


def serve(
    app,
    prog: str,
    argv: Sequence[str] | None = None,
    *,
    input_errors: tuple[type[BaseException], ...] = (InputError,),
    remote_errors: tuple[type[BaseException], ...] = (RemoteError,),
) -> int:
    """Run a program's typer `app` on `argv` (default: sys.argv); its exit code (see the module docstring)."""
    import typer
    from typer._click import exceptions as click_errors

    try:
        result = typer.main.get_command(app).main(
            args=list(sys.argv[1:] if argv is None else argv),
            prog_name=f"python -m {PACKAGE}.{prog}",
            standalone_mode=False,
        )
    except click_errors.UsageError as exc:
        print(f"{prog}: {exc.format_message()}".replace("\n", " "), file=sys.stderr)
        return EXIT_INPUT
    except input_errors as exc:
        print(f"{prog}: {exc}".replace("\n", " "), file=sys.stderr)
        return EXIT_INPUT
    except remote_errors as exc:
        print(f"{prog}: {exc}".replace("\n", " "), file=sys.stderr)
        return EXIT_REMOTE
    if isinstance(result, int) and not isinstance(result, bool):  # --help printed and returned 0
        return result
    code = 0
    if isinstance(result, ExitWith):
        result, code = result.result, result.exit_code
    print(_dump(result), flush=True)
    return code
