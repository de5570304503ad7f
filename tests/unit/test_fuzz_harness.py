"""A fuzzing harness over every parser and CLI entry point that reads a user file (issue 24): generated
hostile topology files, stack files, inventories, .env/.secrets.env, compose files and run records, fed
through the real entry point (`n8n_sizer.cli.main`, in-process).

Properties, for every generated input: the exit code is 0, 1 or 2 (never a traceback, never 70); on 2,
stderr is exactly one line; nothing is written outside the command's --out; and, where a render succeeds
over existing secrets, every copy still holds one encryption key (no silent rotation). Inputs are bounded
in size and every test has a timeout, so a hang fails instead of stalling the suite. Derandomized and
modest in examples, so it is fast and the same in CI.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from n8n_sizer.bundle.secrets import parse_env_text, read_env_strict
from n8n_sizer.errors import InputError
from tests.unit.test_security_inputs import INVENTORY

ROOT = Path(__file__).resolve().parents[2]
BASE_TOPOLOGY = json.loads((ROOT / "tests" / "data" / "topologies" / "lb-apart.json").read_text())
BASE_STACK = (ROOT / "stacks" / "Pulumi.single.yaml").read_text()
FUZZ = settings(
    max_examples=25,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Pieces that broke parsers before (issue 12, issue 24), mixed into generated text.
NASTY = [
    "\x00",
    "\xff",
    "\n",
    "\r",
    "\u2028",
    "\ufeff",
    "'",
    '"',
    "$",
    "#",
    ":",
    "@",
    "/",
    "\\",
    "${X}",
    "{",
    "[",
    "9" * 5000,
    "[" * 3000,
    "1e999",
    "NaN",
    "-Infinity",
    "-5",
    "0",
    "2.5",
    "abc",
    "0.0.0.0/0",
    "::1",
    "10.89.0.7/24",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "fd00::/8",
    "a" * 2000,
    "root@h",
    "h:22",
    "http://h/",
    "N8N_ENCRYPTION_KEY",
    "n8n_encryption_key",
    "=",
    "*a",
    "&a",
    "!!python/object:os.system",
]
nasty_text = st.lists(st.one_of(st.sampled_from(NASTY), st.text(max_size=12)), max_size=6).map("".join)
json_scalar = st.one_of(st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.floats(allow_nan=True), nasty_text)
json_value = st.recursive(
    json_scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(nasty_text, inner, max_size=3)),
    max_leaves=8,
)


def run_cli(*args) -> tuple[int, str, str]:
    """The real entry point, in-process; (exit code, stdout, stderr)."""
    from n8n_sizer.cli import main

    out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    with (
        out,
        err,
        mock.patch.object(sys, "argv", ["n8n-sizer", *map(str, args)]),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        out.seek(0)
        err.seek(0)
        return code, out.read(), err.read()


def assert_clean(code: int, out: str, err: str) -> None:
    assert "Traceback" not in out + err, err
    assert code in (0, 1, 2), (code, err)
    if code == 2:
        assert len(err.strip().splitlines()) == 1, err


def tree(folder: Path, skip: Path | None = None) -> dict[str, int]:
    """Every path under `folder` (outside `skip`) with its size: what a command may not change."""
    found = {}
    for dirpath, _dirs, files in os.walk(folder):
        if skip is not None and Path(dirpath).resolve().is_relative_to(skip.resolve()):
            continue
        for name in files:
            path = Path(dirpath) / name
            found[str(path)] = path.lstat().st_size
    return found


def mutate(doc, path: list, value):
    """`doc` with the value at `path` (keys/indexes, followed as far as they go) replaced by `value`."""
    doc = json.loads(json.dumps(doc))
    node = doc
    for step in path[:-1]:
        if isinstance(node, dict) and step in node:
            node = node[step]
        elif isinstance(node, list) and isinstance(step, int) and node:
            node = node[step % len(node)]
        else:
            break
    last = path[-1] if path else "topology"
    if isinstance(node, list) and isinstance(last, int) and node:
        node[last % len(node)] = value
    elif isinstance(node, dict):
        node[last if isinstance(last, str) else "topology"] = value
    return doc


topology_paths = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "topology",
                "concurrency",
                "db_pool_size",
                "subnet",
                "name",
                "roles",
                "count",
                "size",
                "workers",
                "max_connections",
                "n8n_version",
                "provider",
                "webhook",
            ]
        ),
        st.integers(0, 4),
    ),
    min_size=1,
    max_size=4,
)


@pytest.mark.timeout(120)
@FUZZ
@given(path=topology_paths, value=json_value, raw=st.sampled_from([None, "[" * 100_000, "9" * 5000, "\xff{}", ""]))
def test_topology_files_through_render_advise_and_check(path, value, raw):
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        file = base / "advice.json"
        if raw is not None:
            file.write_bytes(raw.encode("utf-8", "surrogateescape"))
        else:
            file.write_text(json.dumps(mutate(BASE_TOPOLOGY, path, value)))
        out = base / "out"
        before = tree(base)
        assert_clean(*run_cli("render", "--topology", file, "--out", out))
        assert {k: v for k, v in tree(base, skip=out).items()} == before  # nothing outside --out
        assert_clean(*run_cli("advise", "--rps", "40", "--topology", file))
        if out.is_dir():
            assert_clean(*run_cli("check", "--topology", out))


@pytest.fixture(scope="module")
def rendered_once(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fuzz") / "cluster"
    assert (
        run_cli(
            "render",
            "--topology",
            ROOT / "tests" / "data" / "topologies" / "lb-apart.json",
            "--out",
            out,
            "--public-url",
            "http://n8n.example.com:5678/",
        )[0]
        == 0
    )
    return out


secret_lines = st.lists(
    st.one_of(
        st.tuples(
            st.sampled_from(
                [
                    "N8N_ENCRYPTION_KEY",
                    "n8n_encryption_key",
                    "POSTGRES_PASSWORD",
                    "REDIS_PASSWORD",
                    "RUNNERS_AUTH_TOKEN",
                    "N8N-ENCRYPTION-KEY",
                    "X",
                ]
            ),
            nasty_text,
        ).map("=".join),
        nasty_text,
    ),
    max_size=6,
).map("\n".join)


@pytest.mark.timeout(120)
@FUZZ
@given(
    where=st.sampled_from([".secrets.env", "core/.env", "worker/.env", "core/cloud-init.yaml", "topology.json"]),
    text=secret_lines,
    flag=st.booleans(),
)
def test_secret_files_never_rotate_a_key_and_never_traceback(where, text, flag, rendered_once):
    import shutil

    advice = ROOT / "tests" / "data" / "topologies" / "lb-apart.json"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cluster"
        shutil.copytree(rendered_once, out)  # modes kept: the secrets stay 0600
        held = parse_env_text((out / ".secrets.env").read_text())["N8N_ENCRYPTION_KEY"]
        target = out / where
        target.write_bytes(text.encode("utf-8", "surrogateescape"))
        target.chmod(0o600)
        code, said, err = run_cli(
            "render", "--topology", advice, "--out", out, *(["--generate-missing-secrets"] if flag else [])
        )
        assert_clean(code, said, err)
        if code == 0:  # whatever was damaged, the key the other copies held is the one every copy holds now
            keys = {parse_env_text((out / ".secrets.env").read_text()).get("N8N_ENCRYPTION_KEY")}
            keys |= {
                parse_env_text((out / h / ".env").read_text()).get("N8N_ENCRYPTION_KEY")
                for h in ("core", "hooks-1", "worker")
            }
            assert keys == {held}, (where, text)
        assert_clean(*run_cli("check", "--topology", out))


@FUZZ
@given(text=secret_lines)
def test_env_parsers_return_or_refuse(text):
    assert isinstance(parse_env_text(text), dict)
    try:
        read_env_strict(text, Path(".env"))
    except InputError as exc:
        assert "\n" not in str(exc)


@pytest.mark.timeout(120)
@FUZZ
@given(line=st.integers(0, 200), text=nasty_text)
def test_compose_files_through_check(line, text):
    lines = (ROOT / "tests" / "golden" / "queue-2-workers" / "docker-compose.yml").read_text().splitlines()
    lines[line % len(lines)] = text
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "docker-compose.yml"
        file.write_bytes("\n".join(lines).encode("utf-8", "surrogateescape"))
        assert_clean(*run_cli("check", file))


@pytest.mark.timeout(120)
@FUZZ
@given(line=st.integers(0, 20), text=nasty_text)
def test_stack_files_through_cost_and_teardown(line, text):
    lines = BASE_STACK.splitlines()
    lines[line % len(lines)] = text
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "stacks").mkdir()
        (project / "Pulumi.yaml").write_text("name: n8n-sizer\n")
        (project / "stacks" / "Pulumi.fuzz.yaml").write_bytes("\n".join(lines).encode("utf-8", "surrogateescape"))
        with mock.patch.dict(os.environ, {"PATH": tmp}, clear=False):
            assert_clean(*run_cli("cost", "--stack", "fuzz", "--stacks-dir", project / "stacks"))


# Every generated host value carries a character no host name has, so no example can reach the network.
hostile_host = st.tuples(nasty_text, st.sampled_from(["@", ":", "/", " ", "\n", "\x00", "%"]), nasty_text).map("".join)


@pytest.mark.timeout(120)
@FUZZ
@given(field=st.sampled_from(["public_ip", "private_ip", "ssh_user", "name"]), value=hostile_host)
def test_inventories_through_bench(field, value):
    from n8n_sizer.fleet.inventory import load_inventory

    inv = json.loads(json.dumps(INVENTORY))
    inv["hosts"]["t1"][field] = value
    with pytest.raises(InputError):
        load_inventory(json.dumps(inv))
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "inv.json"
        file.write_text(json.dumps(inv))
        with mock.patch.dict(os.environ, {"PATH": tmp}, clear=False):
            code, out, err = run_cli("bench", "--inventory", file, "--out", Path(tmp) / "results")
        assert_clean(code, out, err)
        assert code == 2


@pytest.mark.timeout(120)
@FUZZ
@given(
    lines=st.lists(
        st.one_of(st.binary(max_size=60), nasty_text.map(lambda t: t.encode("utf-8", "surrogateescape"))), max_size=5
    )
)
def test_run_records_through_report_and_advise(lines):
    from n8n_sizer.runs.records import RunManifest
    from n8n_sizer.runs.store import RunStore

    with tempfile.TemporaryDirectory() as tmp:
        manifest = RunManifest(
            run_id="r1",
            kind="bench",
            created_s=1.0,
            finished_s=2.0,
            setup={"mode": "regular"},
            hosts={"t1": {"setup": {"mode": "regular"}, "facts": {"vcpu": 2}}},
        )
        store = RunStore.create(Path(tmp) / "results", manifest)
        store.close()
        for name in ("requests.jsonl", "samples.jsonl"):
            (store.folder / name).write_bytes(b"\n".join(lines))
        assert_clean(*run_cli("report", store.folder, "--no-plots", "--out", Path(tmp) / "report"))
        assert_clean(*run_cli("advise", "--rps", "5", "--results", Path(tmp) / "results"))


manifest_paths = st.lists(
    st.one_of(
        st.sampled_from(["subnet", "hosts", "private_ip", "vcpu", "name", "single_host", "max_connections", "roles"]),
        st.integers(0, 4),
    ),
    min_size=1,
    max_size=3,
)


@pytest.mark.timeout(120)
@FUZZ
@given(
    path=manifest_paths,
    value=json_value,
    host=st.sampled_from(["core", "worker", "hooks-1"]),
    line=st.integers(0, 200),
    text=nasty_text,
)
def test_hand_edited_cluster_folders_through_check_topology(path, value, host, line, text, rendered_once):
    """A rendered folder whose topology.json and one host's compose file were edited by hand."""
    import shutil

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cluster"
        shutil.copytree(rendered_once, out)
        manifest = json.loads((out / "topology.json").read_text())
        (out / "topology.json").write_text(json.dumps(mutate(manifest, path, value)))
        compose = out / host / "docker-compose.yml"
        lines = compose.read_text().splitlines()
        lines[line % len(lines)] = text
        compose.write_bytes("\n".join(lines).encode("utf-8", "surrogateescape"))
        assert_clean(*run_cli("check", "--topology", out))
        assert_clean(*run_cli("check", "--topology", out, "--json"))


# --- issue 40: run records, ledgers, request and sample lines, compose YAML tricks, URLs, output folders ------------
# The cases come from tests/unit/hostile_cases.py; benchmarks/hostile_campaign.py runs every one of them and prints
# counts. Here hypothesis draws a sample, so the suite stays fast.

from tests.unit import hostile_cases as hc  # noqa: E402

RUN_PATHS = hc.run_json_paths()
RAW_OR_VALUE = st.one_of(st.sampled_from(hc.HOSTILE_VALUES), st.sampled_from(hc.RAW_VALUES).map(lambda r: ("raw", r)))


def _damaged_run(tmp: Path, name: str, text: str | bytes, facts: bool) -> Path:
    run = tmp / "run"
    shutil.copytree(hc.BASE_RUN, run)
    if not facts:  # a report that passes would refit the advisor on these facts: seconds each
        (run / "run.json").write_text(json.dumps(hc._without_facts(json.loads((run / "run.json").read_text()))))
    (run / name).write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    return run


def _report_is_clean(run: Path, tmp: Path) -> None:
    before = tree(tmp, skip=tmp / "report")
    code, out, err = run_cli("report", run, "--no-plots", "--out", tmp / "report")
    assert hc.clean(code, out, err) is None, (code, err)
    if code == 0:
        assert hc.report_nonsense((tmp / "report" / "report.md").read_text()) is None
    assert tree(tmp, skip=tmp / "report") == before  # nothing written outside --out


def _fit_input_is_clean(run: Path) -> None:
    """The reading half of `advise --results` (its refit takes seconds): a clean refusal or bounded measurements."""
    from n8n_sizer.runs.fit_input import load_results

    try:
        rows = load_results(run)
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    for m in rows:
        assert m.results.answered_per_min is None or 0 <= m.results.answered_per_min <= 6e6
        assert all(q is None or 0 <= q <= 86_400_000 for q in (m.results.p50_ms, m.results.p95_ms, m.results.p99_ms))


@pytest.mark.timeout(120)
@FUZZ
@given(path=st.sampled_from(RUN_PATHS), value=RAW_OR_VALUE)
def test_every_field_of_run_json_through_report_and_the_results_reader(path, value):
    doc = json.loads((hc.BASE_RUN / "run.json").read_text())
    text = hc._raw(doc, path, value[1]) if isinstance(value, tuple) else json.dumps(hc._set(doc, path, value))
    with tempfile.TemporaryDirectory() as tmp:
        _fit_input_is_clean(_damaged_run(Path(tmp), "run.json", text, facts=True))
    if "facts" in path:
        return  # a report over facts that pass refits the advisor (seconds): the reader above covers them
    no_facts = hc._without_facts(doc)
    text = hc._raw(no_facts, path, value[1]) if isinstance(value, tuple) else json.dumps(hc._set(no_facts, path, value))
    with tempfile.TemporaryDirectory() as tmp:
        _report_is_clean(_damaged_run(Path(tmp), "run.json", text, facts=False), Path(tmp))


JSONL = [("requests.jsonl", n, t) for n, t in hc.jsonl_cases("requests.jsonl")]
JSONL += [("samples.jsonl", n, t) for n, t in hc.jsonl_cases("samples.jsonl")]
JSONL += [("requests.jsonl", n, t) for n, t in hc.schedule_cases()]
JSONL += [("samples.jsonl", n, t) for n, t in hc.load_summary_cases()]


@pytest.mark.timeout(120)
@settings(FUZZ, max_examples=40)
@given(case=st.sampled_from(JSONL))
def test_request_and_sample_lines_through_report_and_the_results_reader(case):
    name, _label, text = case
    with tempfile.TemporaryDirectory() as tmp:
        _report_is_clean(_damaged_run(Path(tmp), name, text, facts=False), Path(tmp))
    with tempfile.TemporaryDirectory() as tmp:
        _fit_input_is_clean(_damaged_run(Path(tmp), name, text, facts=True))


LEDGERS = list(hc.ledger_cases())


@pytest.mark.timeout(120)
@FUZZ
@given(case=st.sampled_from(LEDGERS))
def test_ledgers_through_report(case):
    _label, value = case
    doc = hc._without_facts(json.loads((hc.BASE_RUN / "run.json").read_text()))
    doc["ledgers"]["local"] = value
    with tempfile.TemporaryDirectory() as tmp:
        run = _damaged_run(Path(tmp), "run.json", json.dumps(doc), facts=False)
        code, out, err = run_cli("report", run, "--no-plots", "--out", Path(tmp) / "report")
        assert hc.clean(code, out, err) is None, err
        if code == 0:  # a ledger that passed adds up
            ledger = json.loads((run / "run.json").read_text())["ledgers"]["local"]
            assert ledger["accepted"] + ledger["refused"] == ledger["fired"]


GOLDEN_LINES = hc.GOLDEN_COMPOSE.read_text().splitlines()
KEY_LINES = [i for i, line in enumerate(GOLDEN_LINES) if re.match(r"^\s*[A-Za-z_][\w.-]*:", line)]


@pytest.mark.timeout(120)
@FUZZ
@given(line=st.sampled_from(KEY_LINES), value=st.sampled_from(["evil/evil:latest", "x", "1", "{}", "[]", "''"]))
def test_any_key_of_a_compose_file_written_twice_is_refused(line, value):
    """Compose refuses a mapping key given twice; check must too, whichever key and depth (PyYAML kept the last)."""
    key_line = GOLDEN_LINES[line]
    indent, key = re.match(r"^(\s*)([A-Za-z_][\w.-]*):", key_line).groups()
    end = line + 1  # after the key's own block: the next line at the same or a lower indent
    while end < len(GOLDEN_LINES) and (
        not GOLDEN_LINES[end].strip() or len(GOLDEN_LINES[end]) - len(GOLDEN_LINES[end].lstrip()) > len(indent)
    ):
        end += 1
    if GOLDEN_LINES[line].lstrip().startswith("- "):
        return  # a list item's first key: the duplicate would start a new item
    lines = GOLDEN_LINES[:end] + [f"{indent}{key}: {value}"] + GOLDEN_LINES[end:]
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "docker-compose.yml"
        file.write_text("\n".join(lines) + "\n")
        code, out, err = run_cli("check", file)
        assert hc.clean(code, out, err) is None and code == 2, (key_line, err)
        assert "appears twice" in err and f"{key!r}" in err


@pytest.mark.timeout(120)
@FUZZ
@given(case=st.sampled_from(list(hc.compose_cases()) + [(n, f, "refuse") for n, f in hc.compose_sibling_cases()]))
def test_compose_yaml_tricks_through_check(case):
    name, content, _ = case
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "docker-compose.yml"
        if isinstance(content, dict):  # files beside the golden compose file
            shutil.copy(hc.GOLDEN_COMPOSE, file)
            for rel, text in content.items():
                (Path(tmp) / rel).write_text(text)
        else:
            file.write_text(content)
        code, out, err = run_cli("check", file)
        assert hc.clean(code, out, err) is None and code == 2, (name, out, err)


url_part = st.sampled_from(["http", "https", "ftp", "HTTP", "", "javascript"])
url_auth = st.sampled_from(["", "user@", "user:pass@", ":@", "a@b@"])
url_host = st.sampled_from(
    ["n8n.example.com", "10.0.0.1", "[::1]", "999.1.1.1", "", "-x.com", "a..b", "xn--bcher-kva.example"]
)
url_port = st.sampled_from(["", ":5678", ":0", ":99999", ":", ":-1", ":1a", ":65535"])
url_path = st.one_of(
    st.sampled_from(["", "/", "/webhook/x", "/?q=1", "/#f", "/${X}", "/a b"]), nasty_text.map(lambda t: "/" + t)
)


@settings(FUZZ, max_examples=300)
@given(scheme=url_part, auth=url_auth, host=url_host, port=url_port, path=url_path)
def test_what_the_url_grammar_accepts_holds_no_credentials_bad_port_or_control_character(
    scheme, auth, host, port, path
):
    from n8n_sizer.safety.urls import url_parts

    text = f"{scheme}://{auth}{host}{port}{path}"
    try:
        url = url_parts(text, "--public-url")
    except ValueError as exc:
        assert "\n" not in str(exc) and "\x1b" not in str(exc)
        return
    assert url.scheme in ("http", "https") and "@" not in text.split("/")[2]
    assert url.port is None or 1 <= url.port <= 65535
    assert text.isascii() and text.isprintable() and not any(c.isspace() for c in text)
    assert not set("\"'`$\\<>{}|^#?") & set(text)


@pytest.mark.timeout(120)
@FUZZ
@given(
    url=st.one_of(
        st.sampled_from(list(hc.url_cases())),
        st.tuples(url_part, url_auth, url_host, url_port, url_path).map(lambda p: f"{p[0]}://{''.join(p[1:])}"),
    )
)
def test_public_urls_through_render(url):
    from n8n_sizer.safety.urls import url_parts

    try:
        url_parts(url)
        good = True
    except ValueError:
        good = False
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        code, said, err = run_cli("render", "--mode", "regular", "--out", out, "--public-url", url)
        assert hc.clean(code, said, err) is None, err
        if not good:  # refused, and nothing written: no credentials in any .env or cloud-init.yaml
            assert code == 2 and not out.exists()


FOLDERS = list(hc.folder_cases())


@pytest.mark.timeout(120)
@FUZZ
@given(case=st.sampled_from(FOLDERS), writer=st.sampled_from(["render", "advise", "report"]))
def test_output_folders_others_could_change_are_refused(case, writer):
    _name, make = case
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "case"
        base.mkdir()
        out, watched = make(base)
        before = tree(watched) if watched.exists() else {}
        args = {
            "render": ("render", "--mode", "regular", "--out", out),
            "advise": ("advise", "--rps", "5", "--vcpu", "2", "--compose", out),
            "report": ("report", hc.BASE_RUN, "--no-plots", "--out", out),
        }[writer]
        code, said, err = run_cli(*args)
        assert hc.clean(code, said, err) is None and code == 2, (writer, _name, err)
        assert (tree(watched) if watched.exists() else {}) == before
