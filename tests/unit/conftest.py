"""Session fixtures for the unit tests: expensive computations done once and shared.

`advise --validate` refits the capacity model once per held-out point, per held-out step and per lab topology
(seconds, each refit starting at the full fit's optimum). Several tests read its output, as text and as JSON; here it
runs once and every output comes from the same computation through the same entry point.
"""

from __future__ import annotations

import contextlib
import io
import sys

import pytest


def _advise_in_process(args: list[str]) -> tuple[int, str, str]:
    """`advise ARGS` through its entry point (`advise_main`, as the console script runs it), in this process:
    (exit code, stdout, stderr)."""
    from n8n_sizer.cli import advise_main

    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["advise", *args]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                advise_main()
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.argv = argv
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="session")
def embedded_validation():
    """`validate_model` over the embedded measurements, per-role steps, lab and prices included: what
    `advise --validate` prints."""
    from n8n_sizer.advisor.measurements import load_embedded
    from n8n_sizer.advisor.validate import validate_model

    return validate_model(tuple(load_embedded()))


@pytest.fixture(scope="session")
def advise_validate(embedded_validation) -> dict[str, tuple[int, str, str]]:
    """`advise --validate` as text and as JSON (exit code, stdout, stderr): both outputs of one validation, which
    `print_validation` would otherwise compute again for each."""
    from n8n_sizer.advisor import validate
    from n8n_sizer.advisor.measurements import load_embedded

    rows = tuple(load_embedded())
    real = validate.validate_model

    def once(measurements, quick=False, on_line=None, **kwargs):
        if tuple(measurements) != rows or quick or kwargs:
            return real(measurements, quick=quick, on_line=on_line, **kwargs)
        for line in embedded_validation.lines:  # what it said as it went, said again
            (on_line or (lambda _line: None))(line)
        return embedded_validation

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(validate, "validate_model", once)
        return {"text": _advise_in_process(["--validate"]), "json": _advise_in_process(["--validate", "--json"])}
