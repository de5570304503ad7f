"""Fuzzing every parser of user files (compose for `check`, `.env`, stack files, inventories, workflow
files): a table of hostile files (tests/data/hostile/) and hypothesis properties. Each parser either
returns a correct result or raises one clean `InputError` line: never another exception, never a hang."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from n8n_sizer.bundle.checks.one_host import check_compose
from n8n_sizer.bundle.secrets import ENV_NAMES, check_existing_secrets, parse_env_text, read_env_strict
from n8n_sizer.cli.args import check_workflow
from n8n_sizer.errors import InputError
from n8n_sizer.fleet.inventory import load_inventory
from n8n_sizer.fleet.stackfile import load_stack_file
from n8n_sizer.safety.files import read_user_text
from n8n_sizer.safety.yamldoc import load_yaml

HOSTILE = Path(__file__).resolve().parents[1] / "data" / "hostile"
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _clean(exc: InputError) -> None:
    message = str(exc)
    assert message and "\n" not in message and "Traceback" not in message


def _files(kind: str) -> list[Path]:
    return sorted((HOSTILE / kind).iterdir())


# --- compose (check) -------------------------------------------------------------------------------------

# Files that are valid Compose and must be judged, not refused.
JUDGED = {"max-connections-beyond.yml", "ports-huge-range.yml", "ports-broken-ipv6.yml", "pool-5000-digits.yml"}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("path", _files("compose"), ids=lambda p: p.name)
def test_hostile_compose_files(path: Path) -> None:
    try:
        results = check_compose(read_user_text(path, "FILE", fix="pass a compose file"), {}, 4)
    except InputError as exc:
        _clean(exc)
        assert path.name not in JUDGED, f"{path.name} is valid Compose and should be judged: {exc}"
        return
    assert path.name in JUDGED, f"{path.name} was accepted"
    assert {r.rule for r in results} >= {"postgres-pool", "metrics-public"}


def test_check_flags_max_connections_beyond_postgres() -> None:
    results = {
        r.rule: r for r in check_compose((HOSTILE / "compose" / "max-connections-beyond.yml").read_text(), {}, 4)
    }
    assert results["postgres-pool"].status == "fail" and "262143" in results["postgres-pool"].message


def test_a_huge_port_range_makes_no_ports() -> None:
    from n8n_sizer.bundle.composefile import load_compose

    compose = load_compose((HOSTILE / "compose" / "ports-huge-range.yml").read_text())
    assert compose.services[0].ports == []


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20))
JSONISH = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=25,
)
KEYS = st.sampled_from(
    [
        "image",
        "command",
        "environment",
        "env_file",
        "depends_on",
        "healthcheck",
        "ports",
        "volumes",
        "labels",
        "network_mode",
        "stop_grace_period",
        "container_name",
        "hostname",
    ]
)


@FAST
@given(
    services=st.dictionaries(
        st.text(min_size=1, max_size=8), st.one_of(JSONISH, st.dictionaries(KEYS, JSONISH, max_size=6)), max_size=4
    )
)
def test_compose_of_any_shape_is_judged_or_refused(services) -> None:
    text = yaml.safe_dump({"services": services}, allow_unicode=True)
    try:
        results = check_compose(text, {"A": "1"}, 4)
    except InputError as exc:
        _clean(exc)
    else:
        assert len(results) >= 19


@FAST
@given(text=st.text(max_size=400))
def test_any_text_as_compose_is_judged_or_refused(text) -> None:
    try:
        check_compose(text, {}, None)
    except InputError as exc:
        _clean(exc)


@settings(max_examples=40, deadline=None)
@given(width=st.integers(2, 12), depth=st.integers(2, 12))
def test_alias_bombs_of_any_size_are_refused_before_expansion_or_small(width, depth) -> None:
    doc = 'a0: &a0 "lol"\n' + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]\n" for i in range(1, depth))
    try:
        load_yaml(doc, "the compose file", fix="fix it")
    except InputError as exc:
        _clean(exc)
        assert width ** (depth - 1) * 4 > 1_000_000  # refused only when it really is large
    else:
        assert width ** (depth - 1) * 4 <= 4_000_000 * 2


# --- .env --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", _files("env"), ids=lambda p: p.name)
def test_hostile_env_files(path: Path, tmp_path: Path) -> None:
    try:
        text = read_user_text(path, "--env", fix="pass a .env")
        entries = read_env_strict(text, path)
        check_existing_secrets(entries, path, generate_missing=False)
    except InputError as exc:
        _clean(exc)
        return
    pytest.fail(f"{path.name} was accepted as a complete .env")


@FAST
@given(text=st.text(max_size=300))
def test_env_parsers_never_raise_anything_else(text) -> None:
    lenient = parse_env_text(text)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in lenient.items())
    try:
        strict = read_env_strict(text, Path(".env"))
    except InputError as exc:
        _clean(exc)
        return
    assert {k: e.value for k, e in strict.items()} == lenient  # strict accepts only what loses nothing


@FAST
@given(
    values=st.dictionaries(
        st.from_regex(r"[A-Z_][A-Z0-9_]{0,10}", fullmatch=True),
        st.from_regex(r"[A-Za-z0-9._:@%+-]{0,30}", fullmatch=True),
        max_size=6,
    )
)
def test_env_round_trip(values) -> None:
    text = "".join(f"{k}={v}\n" for k, v in values.items())
    assert {k: e.value for k, e in read_env_strict(text, Path(".env")).items()} == values
    try:
        check_existing_secrets(read_env_strict(text, Path(".env")), Path(".env"), generate_missing=False)
    except InputError as exc:
        _clean(exc)
        assert any(not values.get(n) for n in ENV_NAMES.values())


# --- stack files ---------------------------------------------------------------------------------------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize("path", _files("stack"), ids=lambda p: p.name)
def test_hostile_stack_files(path: Path) -> None:
    with pytest.raises(InputError) as err:
        load_stack_file(path)
    _clean(err.value)


@FAST
@given(
    config=st.dictionaries(
        st.sampled_from(
            [
                "n8n-sizer:owner",
                "n8n-sizer:ttl_hours",
                "n8n-sizer:provider",
                "n8n-sizer:location",
                "n8n-sizer:loadgen",
                "n8n-sizer:targets",
                "n8n-sizer:operator_cidr",
                "n8n-sizer:other",
                "gcp:project",
            ]
        ),
        JSONISH,
        max_size=9,
    )
)
def test_stack_files_of_any_shape_parse_or_are_refused(config, tmp_path_factory) -> None:
    path = tmp_path_factory.mktemp("stacks") / "Pulumi.fuzz.yaml"
    path.write_text(yaml.safe_dump({"config": config}))
    try:
        spec = load_stack_file(path)
    except InputError as exc:
        _clean(exc)
    else:
        assert spec.stack == "fuzz"


# --- inventories and workflow files ------------------------------------------------------------------------


@pytest.mark.timeout(30)
@pytest.mark.parametrize("path", _files("inventory"), ids=lambda p: p.name)
def test_hostile_inventories(path: Path) -> None:
    from n8n_sizer.cli.args import check_inventory

    with pytest.raises(InputError) as err:
        check_inventory(path)
    _clean(err.value)


@FAST
@given(doc=JSONISH)
def test_inventory_of_any_json_loads_or_is_refused(doc) -> None:
    import json

    try:
        load_inventory(json.dumps(doc))
    except InputError as exc:
        _clean(exc)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("path", _files("workflow"), ids=lambda p: p.name)
def test_hostile_workflows(path: Path) -> None:
    with pytest.raises(InputError) as err:
        check_workflow(str(path))
    _clean(err.value)


@FAST
@given(doc=JSONISH)
def test_workflow_of_any_json_is_checked_or_refused(doc, tmp_path_factory) -> None:
    import json

    path = tmp_path_factory.mktemp("wf") / "flow.json"
    path.write_text(json.dumps(doc))
    try:
        check_workflow(str(path))
    except InputError as exc:
        _clean(exc)
    else:
        assert isinstance(doc, dict) and doc["nodes"] and all(isinstance(n, dict) for n in doc["nodes"])


# --- the shared reader -------------------------------------------------------------------------------------


def test_the_reader_refuses_what_is_not_a_regular_text_file(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    cases = {
        tmp_path: "is a folder",
        tmp_path / "missing": "no such file",
        fifo: "not a regular file",
        Path("/dev/zero"): "not a regular file",
        HOSTILE / "compose" / "binary.yml": "binary",
        HOSTILE / "compose" / "latin1.yml": "not UTF-8",
        "": "not a usable path",
    }
    for path, reason in cases.items():
        with pytest.raises(InputError, match=reason):
            read_user_text(path, "FILE", fix="pass a text file")
    big = tmp_path / "big"
    big.write_bytes(b"a" * 2048)
    with pytest.raises(InputError, match="above the 1,024-byte limit"):
        read_user_text(big, "FILE", fix="x", max_bytes=1024)


@pytest.mark.timeout(30)
def test_a_long_line_does_not_make_the_env_parser_backtrack() -> None:
    # x, 300,000 spaces, y: a regex with a lazy value before `\s*$` took minutes on this (quadratic).
    text = "N8N_ENCRYPTION_KEY=x" + " " * 300_000 + "y\n"
    assert parse_env_text(text)["N8N_ENCRYPTION_KEY"] == "x" + " " * 300_000 + "y"
    assert read_env_strict(text, Path(".env"))["N8N_ENCRYPTION_KEY"].line == 1


@pytest.mark.timeout(30)
def test_interpolation_cannot_multiply_a_large_env_value() -> None:
    refs = "${X}" * 200_000
    compose = f'services:\n  n8n:\n    image: n8nio/n8n:2.41.1\n    environment:\n      A: "{refs}"\n'
    with pytest.raises(InputError, match="expands past the size limit") as err:
        check_compose(compose, {"X": "x" * 100_000}, 4)  # 20 GB once filled in
    _clean(err.value)
    assert len(check_compose(compose, {"X": "x"}, 4)) >= 19  # 200,000 characters: judged
