"""Session fixtures for the unit tests: expensive computations done once and shared.

`advise --validate` refits the capacity model once per held-out point (leave-one-out, about a minute on a 2-core
machine) and once per lab topology. Three tests read its output; they used to run it four times (two CLI runs and
one in-process call in test_workflow_refit.py, one CLI run in test_advise_cli.py). Here the fit runs once and
every output comes from the same computation through the same entry point.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Callable
from typing import Any

import pytest


def _once(real: Callable[..., Any], measurements: tuple, **known: Any) -> Callable[..., Any]:
    """`real`, computed once for `measurements` (the embedded rows; `value=` when already computed) and handed
    back on every later call with the same rows; other rows or arguments go to `real` itself."""
    memo: dict[str, Any] = dict(known)

    def cached(rows, *args, **kwargs):
        if args or kwargs or tuple(rows) != measurements:
            return real(rows, *args, **kwargs)
        if "value" not in memo:
            memo["value"] = real(rows)
        return memo["value"]

    return cached


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
    """`leave_one_out` over the embedded measurements, per-role rows included: what `advise --validate` prints."""
    from n8n_sizer.advisor.measurements import load_embedded
    from n8n_sizer.advisor.validate import leave_one_out

    return leave_one_out(tuple(load_embedded()))


@pytest.fixture(scope="session")
def advise_validate(embedded_validation) -> dict[str, tuple[int, str, str]]:
    """`advise --validate` as text and as JSON (exit code, stdout, stderr): both outputs of one leave-one-out
    and one set of lab fits, which `print_validation` would otherwise compute again for each."""
    from n8n_sizer.advisor import validate
    from n8n_sizer.advisor.answer import lab_points
    from n8n_sizer.advisor.measurements import load_embedded

    rows = tuple(load_embedded())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(validate, "leave_one_out", _once(validate.leave_one_out, rows, value=embedded_validation))
        patch.setattr(lab_points, "lab_checks", _once(lab_points.lab_checks, rows))
        return {"text": _advise_in_process(["--validate"]), "json": _advise_in_process(["--validate", "--json"])}
