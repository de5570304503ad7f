"""The suite's own rule: a run that collects no test fails loudly (pytest would exit 5, which a wrapper could
mistake for "nothing to do"), naming the paths it was given."""

from __future__ import annotations

import pytest


def pytest_collection_finish(session: pytest.Session) -> None:
    if not session.items:
        raise pytest.UsageError(
            f"no tests collected from {' '.join(map(str, session.config.args)) or 'tests/'}: "
            "check the paths and -k/-m filters given to `bash scripts/test.sh`"
        )
