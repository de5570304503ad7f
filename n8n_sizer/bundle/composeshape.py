"""The shape a compose file must have before `check` reads it: each key `check` uses, with the types the
Compose Specification allows. Valid YAML of the wrong shape (services as a list, a service as a string,
`environment: 42`, `depends_on: 7`, `ports: 5678`) is one `InputError` naming the key and what it
should be, instead of an AttributeError deep inside a rule.
"""

from __future__ import annotations

import math
from typing import Any

from n8n_sizer.errors import InputError

FIX = "fix the compose file (see the Compose Specification), then run check again"
_SCALAR = (str, int, float, bool)
_KINDS = {"mapping": dict, "list": list, "string": str, "number": (int, float), "scalar": _SCALAR}


def _kind(value: Any) -> str:
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return f"a {type(value).__name__}"


def _fail(where: str, value: Any, wanted: str) -> InputError:
    where = where.encode("unicode_escape").decode("ascii")[:120]  # a key may hold newlines or control bytes
    return InputError(f"the compose file's {where} is {_kind(value)}; Compose wants {wanted}; {FIX}")


def _is(value: Any, *kinds: str) -> bool:
    if isinstance(value, bool) and "scalar" not in kinds:
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return any(isinstance(value, _KINDS[k]) for k in kinds)


def _list_of(where: str, value: Any, item_kinds: tuple[str, ...], wanted: str) -> None:
    if not isinstance(value, list):
        raise _fail(where, value, wanted)
    for i, item in enumerate(value):
        if not _is(item, *item_kinds):
            raise _fail(f"{where}[{i}]", item, wanted)


def _mapping_of_scalars(where: str, value: dict, wanted: str) -> None:
    for key, item in value.items():
        if not _is(key, "scalar") or not (item is None or _is(item, "scalar")):
            raise _fail(f"{where}.{key}", item, wanted)


def check_service(name: str, spec: Any) -> None:
    """Refuse a service whose keys `check` reads have a type Compose would refuse too."""
    where = f"services.{name}"
    if spec is None:
        return
    if not isinstance(spec, dict):
        raise _fail(where, spec, "a mapping of service settings (image:, environment:, ...)")
    for key in ("image", "network_mode", "container_name", "hostname"):
        if spec.get(key) is not None and not _is(spec[key], "string", "number"):
            raise _fail(f"{where}.{key}", spec[key], "a string")
    if spec.get("stop_grace_period") is not None and not _is(spec["stop_grace_period"], "string", "number"):
        raise _fail(f"{where}.stop_grace_period", spec["stop_grace_period"], "a duration such as 60s")
    command = spec.get("command")
    if command is not None and not _is(command, "string"):
        _list_of(f"{where}.command", command, ("scalar",), "a string or a list of strings")
    for key in ("environment", "labels"):
        value = spec.get(key)
        if value is None:
            continue
        wanted = "a mapping or a list of KEY=VALUE strings"
        if isinstance(value, dict):
            _mapping_of_scalars(f"{where}.{key}", value, wanted)
        else:
            _list_of(f"{where}.{key}", value, ("scalar",), wanted)
    env_file = spec.get("env_file")
    if env_file is not None and not _is(env_file, "string"):
        entries = env_file if isinstance(env_file, list) else [env_file]
        for i, entry in enumerate(entries):
            if not (_is(entry, "string") or (isinstance(entry, dict) and _is(entry.get("path"), "string"))):
                raise _fail(f"{where}.env_file[{i}]", entry, "a path, or a list of paths or {path: ...} mappings")
    deps = spec.get("depends_on")
    if deps is not None:
        wanted = "a list of service names or a mapping of name: {condition: ...}"
        if isinstance(deps, dict):
            for dep, cfg in deps.items():
                if not (
                    cfg is None
                    or (isinstance(cfg, dict) and (cfg.get("condition") is None or _is(cfg.get("condition"), "string")))
                ):
                    raise _fail(f"{where}.depends_on.{dep}", cfg, wanted)
        else:
            _list_of(f"{where}.depends_on", deps, ("string", "number"), wanted)
    health = spec.get("healthcheck")
    if health is not None:
        if not isinstance(health, dict):
            raise _fail(f"{where}.healthcheck", health, "a mapping (test:, interval:, ...)")
        test = health.get("test")
        if test is not None and not _is(test, "string"):
            _list_of(f"{where}.healthcheck.test", test, ("scalar",), "a string or a list of strings")
    for key, wanted in (
        ("ports", 'a list of "HOST:CONTAINER" strings or {target: ...} mappings'),
        ("volumes", 'a list of "SOURCE:TARGET" strings or {source:, target:} mappings'),
    ):
        value = spec.get(key)
        if value is None:
            continue
        if not isinstance(value, list):
            raise _fail(f"{where}.{key}", value, wanted)
        for i, entry in enumerate(value):
            if isinstance(entry, dict):
                target = entry.get("target")
                if key == "ports" and not (
                    isinstance(target, int)
                    and not isinstance(target, bool)
                    or (isinstance(target, str) and target.strip().isdigit())
                ):
                    raise _fail(f"{where}.ports[{i}].target", target, "a container port number")
                for field in ("target", "source", "host_ip", "published"):
                    if entry.get(field) is not None and not _is(entry[field], "string", "number"):
                        raise _fail(f"{where}.{key}[{i}].{field}", entry[field], "a string or number")
            elif not _is(entry, "string", "number"):
                raise _fail(f"{where}.{key}[{i}]", entry, wanted)


def check_shape(doc: Any) -> None:
    """Refuse a document that is not a compose mapping with a `services:` mapping of service mappings."""
    if not isinstance(doc, dict) or not isinstance(doc.get("services"), dict):
        raise InputError("the compose file has no `services:` mapping; pass a Docker Compose file")
    for name, spec in doc["services"].items():
        if not _is(name, "string", "number"):
            raise _fail("services key", name, "service names that are strings")
        check_service(str(name), spec)
    configs = doc.get("configs")
    if configs is not None and not isinstance(configs, dict):
        raise _fail("configs", configs, "a mapping of config name: {content: ...}")
