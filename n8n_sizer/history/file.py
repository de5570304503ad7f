"""The history file, read and written through safety/: one reader (bounded, checked JSON), one atomic writer."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from n8n_sizer.errors import InputError
from n8n_sizer.history.record import FORMAT, History

MAX_HISTORY_BYTES = 64 << 20
FIX = "write one with `n8n-sizer history export URL --out history.json`"


def load_history(path: Path | str, flag: str = "--history") -> History:
    """A history file, checked: its format version, then every field; one line naming the file when not."""
    from n8n_sizer.safety.files import read_user_text
    from n8n_sizer.safety.jsondoc import load_json

    doc = load_json(read_user_text(path, flag, fix=FIX, max_bytes=MAX_HISTORY_BYTES), f"{flag} {path}", FIX)
    if not isinstance(doc, dict):
        raise InputError(f"{flag} {path}: not a history (a JSON object with format {FORMAT!r}); {FIX}")
    if doc.get("format") != FORMAT:
        raise InputError(
            f"{flag} {path}: format {str(doc.get('format'))[:40]!r}, this n8n-sizer reads {FORMAT!r}; {FIX}"
        )
    try:
        return History.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "history"
        raise InputError(f"{flag} {path}: {where}: {first.get('msg')}; {FIX}") from None


def history_json(history: History) -> str:
    return json.dumps(history.model_dump(mode="json"), indent=1, sort_keys=False) + "\n"


def write_history(history: History, path: Path | str) -> None:
    """Write the history atomically; an existing file is not replaced (a history is a result)."""
    import os

    from n8n_sizer.safety.write import write_atomic

    if os.path.lexists(path):
        raise InputError(f"--out {path} exists; a history is never overwritten: pick another name or remove it")
    write_atomic(path, history_json(history), private=False, what=f"--out {path}")
