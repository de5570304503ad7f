"""The typer app: each room's commands live in their own module here and only parse, call and format.

`main()` runs the app so that every usage error, `InputError` or validation error becomes one line on
stderr and exit code 2, and every `RemoteError` (a host, provider, service or n8n that failed) one line and
exit code 1, with no traceback. Anything else is a bug: one line that says where the traceback was saved
(a 0600 file in a fresh 0700 folder) and where to report it, exit code 70.
"""

from __future__ import annotations

import sys

import typer

# typer >= 0.26 vendors click as typer._click (and no longer installs click): its exceptions are these.
from typer._click import exceptions as _click_errors

from n8n_sizer.cli import advise as _advise
from n8n_sizer.cli import bench as _bench
from n8n_sizer.cli import calibrate as _calibrate
from n8n_sizer.cli import drill as _drill
from n8n_sizer.cli import fleet as _fleet
from n8n_sizer.cli import history as _history
from n8n_sizer.cli import lab as _lab
from n8n_sizer.cli import render as _render
from n8n_sizer.cli import report as _report

app = typer.Typer(
    name="n8n-sizer",
    help="Size, render, provision and benchmark self-hosted n8n from measurements.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_advise.register(app)
_render.register(app)
_fleet.register(app)
_bench.register(app)
_report.register(app)
_drill.register(app)
_lab.register(app)
_calibrate.register(app)
_history.register(app)

# Modules that only an optional extra installs (pyproject.toml), and that extra. A command that reaches one
# without the extra gets one line naming the install, not a traceback; any other missing module is a bug.
EXTRA_OF_MODULE = {
    "fabric": "bench",
    "paramiko": "bench",
    "invoke": "bench",
    "matplotlib": "bench",
    "pulumi": "fleet",
    "pulumi_hcloud": "fleet",
    "pulumi_gcp": "fleet",
    "pulumi_tls": "fleet",
}


def missing_extra_message(prog_name: str, command: str, module: str) -> str | None:
    """The one line for a command that needs an extra whose `module` is not installed, or None."""
    extra = EXTRA_OF_MODULE.get(module.split(".")[0])
    if extra is None:
        return None
    return (
        f"{prog_name}: {command} needs the {extra} extra ({module.split('.')[0]} is not installed): "
        f".venv/bin/pip install '.[{extra}]'"
    )


def _subcommand(prog_name: str, args: list[str] | None) -> str:
    words = [a for a in (sys.argv[1:] if args is None else args) if not a.startswith("-")]
    return prog_name if prog_name != "n8n-sizer" or not words else words[0]


EXIT_BUG = 70  # EX_SOFTWARE (sysexits.h): an internal error
REPORT_AT = "the n8n-sizer issue tracker, with that file and the command you ran"


def _last_resort(prog_name: str) -> None:
    """An exception nobody expected: one line saying where the traceback is and where to report it; the
    traceback itself goes to a private file (a 0700 folder of its own, the file 0600), since it may hold
    paths or values the user would not paste; exit 70."""
    import os
    import tempfile
    import traceback

    text = traceback.format_exc()
    try:
        folder = tempfile.mkdtemp(prefix="n8n-sizer-crash-")  # 0700, unpredictable name
        fd = os.open(os.path.join(folder, "traceback.txt"), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(text)
        where = f"the traceback is in {folder}/traceback.txt"
    except OSError:
        where = "the traceback could not be saved"
    kind = type(sys.exc_info()[1]).__name__
    print(f"{prog_name}: internal error ({kind}); {where}; please report it at {REPORT_AT}", file=sys.stderr)
    sys.exit(EXIT_BUG)


def _one_line(message: str) -> str:
    """An error as one terminal line: it quotes file names and values, so no escape sequence or control character
    of theirs reaches the terminal (safety.text.printable)."""
    from n8n_sizer.safety.text import printable

    return printable(message, limit=4000)


def _run(command, prog_name: str, args: list[str] | None = None) -> None:
    from pydantic import ValidationError

    from n8n_sizer.errors import EXIT_INPUT, EXIT_REMOTE, InputError, RemoteError

    try:
        rv = command.main(args=args, prog_name=prog_name, standalone_mode=False)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        print(f"{prog_name}: aborted", file=sys.stderr)
        sys.exit(130)
    except _click_errors.UsageError as exc:
        hint = f" (see `{prog_name} --help`)"
        print(_one_line(f"{prog_name}: {exc.format_message()}{hint}"), file=sys.stderr)
        sys.exit(2)
    except InputError as exc:
        print(_one_line(f"{prog_name}: {exc}"), file=sys.stderr)
        sys.exit(EXIT_INPUT)
    except RemoteError as exc:
        print(_one_line(f"{prog_name}: {exc}"), file=sys.stderr)
        sys.exit(EXIT_REMOTE)
    except ModuleNotFoundError as exc:
        message = missing_extra_message(prog_name, _subcommand(prog_name, args), exc.name or "")
        if message is None:
            _last_resort(prog_name)
        print(message, file=sys.stderr)
        sys.exit(2)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "input"
        print(_one_line(f"{prog_name}: invalid {where}: {first.get('msg')}"), file=sys.stderr)
        sys.exit(2)
    except Exception:  # noqa: BLE001 - the last resort: a bug of ours, never a traceback on the user's screen
        _last_resort(prog_name)
    sys.exit(rv if isinstance(rv, int) else 0)


def main() -> None:
    """Entry point of `n8n-sizer`."""
    _run(typer.main.get_command(app), "n8n-sizer")


def advise_main() -> None:
    """Entry point of `advise`: the same as `n8n-sizer advise`."""
    import os

    # No pydantic plugin has anything to observe in advise's own models: skip their discovery, a scan of every
    # installed package's entry points at the first model (advise cold start; a value the user set wins).
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "1")
    sub = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    _advise.register(sub)
    _run(typer.main.get_command(sub), "advise")
