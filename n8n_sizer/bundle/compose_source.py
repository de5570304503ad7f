"""Which file `check` judges, read the way Docker Compose reads it.

`check` judges one compose file as written. Compose may run something else: a file that holds a key twice (PyYAML
keeps the last, Compose refuses the file), several documents, merges or tags that YAML readers disagree on (all
refused by `safety.yamldoc`), other files pulled in with `include:` or `extends:`, an image named by a `${VAR}`
that the shell fills in at `docker compose up`, or, in the file's folder, a default compose file Compose prefers,
an override file it merges in, or a COMPOSE_FILE in the folder's `.env`. Each is refused with one line that says
how to judge what really runs (`docker compose config` prints the merged model).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from n8n_sizer.errors import InputError


def parse_compose_doc(text: str, source: str = "the compose file") -> Any:
    """The compose document, with its YAML budgets (nesting, alias expansion), what another YAML reader would
    read differently (duplicate keys, clashing merges, tags, several documents: safety/yamldoc.py), what makes
    Compose run more than this file (`include`, `extends`, an image from the environment) and its shape checked."""
    from n8n_sizer.bundle.composeshape import FIX, check_shape
    from n8n_sizer.safety.yamldoc import load_yaml

    doc = load_yaml(text, source, fix=FIX)
    check_shape(doc)
    _refuse_indirection(doc, source)
    return doc


# What makes Compose run something other than the file as written. `check` judges one file, so each is refused
# with the way to judge what really runs (`docker compose config` prints the merged, interpolated model).
MERGED = "check the merged model instead: `docker compose config > merged.yml` and `n8n-sizer check merged.yml`"


def _refuse_indirection(doc: dict, source: str) -> None:
    if doc.get("include") is not None:
        raise InputError(
            f"{source} includes other compose files (include:), which Compose merges into what runs and check "
            f"does not read; {MERGED}"
        )
    for name, spec in doc["services"].items():
        if not isinstance(spec, dict):
            continue
        where = f"services.{str(name)[:60]!r}"
        if spec.get("extends") is not None:
            raise InputError(
                f"{source}: {where} extends another service (extends:), so Compose builds it from settings "
                f"check would not see; {MERGED}"
            )
        image = spec.get("image")
        if isinstance(image, str) and "$" in image:
            raise InputError(
                f"{source}: {where}.image is {image[:80]!r}: Compose fills it in from the shell's environment or "
                "the .env at `docker compose up`, so check cannot know which image runs; write the image and its "
                f"tag in the file, or {MERGED.removeprefix('check ')}"
            )


# The files `docker compose` reads from a folder when no -f is given: the first of COMPOSE_NAMES that exists, then
# the first override file (compose-go's DefaultFileNames and DefaultOverrideFileNames).
COMPOSE_NAMES = ("compose.yaml", "compose.yml", "docker-compose.yml", "docker-compose.yaml")
OVERRIDE_NAMES = (
    "compose.override.yaml",
    "compose.override.yml",
    "docker-compose.override.yml",
    "docker-compose.override.yaml",
)


def refuse_other_compose_files(path: Path, env: Mapping[str, str]) -> None:
    """Refuse to judge `path` when `docker compose up` in its folder would run something else: another default
    compose file that Compose prefers, an override file it merges in, or a COMPOSE_FILE in the folder's .env (or
    in `env`, the --env given) that names other files."""
    folder = path.parent
    named = env.get("COMPOSE_FILE")
    if named is not None and named.strip() and Path(named.split(os.pathsep)[0]).name != path.name:
        raise InputError(
            f"FILE {path}: COMPOSE_FILE={named[:120]!r} in the .env makes `docker compose up` run that instead; "
            "check the file it names"
        )
    if path.name not in COMPOSE_NAMES:
        return  # `docker compose -f FILE` reads FILE alone
    preferred = next((n for n in COMPOSE_NAMES if os.path.lexists(folder / n)), path.name)
    if preferred != path.name:
        raise InputError(
            f"FILE {path}: its folder also holds {preferred}, which `docker compose up` runs instead of "
            f"{path.name}; remove one of them, or check {folder / preferred}"
        )
    override = next((n for n in OVERRIDE_NAMES if os.path.lexists(folder / n)), None)
    if override is not None:
        raise InputError(
            f"FILE {path}: its folder also holds {override}, which `docker compose up` merges into {path.name}; "
            f"{MERGED}"
        )
