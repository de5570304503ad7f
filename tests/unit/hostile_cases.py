"""Hostile cases shared by the fuzzing harness (tests/unit/test_fuzz_harness.py, a fast sample) and the campaign
(benchmarks/hostile_campaign.py, all of them, with counts): run records, ledgers, request and sample lines, compose
files with YAML tricks, URLs and output folders. Each generator yields (name, case); the checks below say what a
clean answer is: exit 0, 1 or 2, never 70, no traceback, one line on 2, and on 0 an answer without nonsense.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[2]
BASE_RUN = ROOT / "tests" / "data" / "hostile" / "run"
GOLDEN_COMPOSE = ROOT / "tests" / "golden" / "queue-2-workers" / "docker-compose.yml"

# Values every field of a record is tried with: wrong types, negatives, huge, tiny, empty, nested.
HOSTILE_VALUES: list[Any] = [
    None,
    "x",
    "5",
    "",
    -5,
    -1e-9,
    0,
    10**30,
    1e308,
    -1e308,
    True,
    [],
    [1, 2],
    {},
    {"a": 1},
    "\x1b]0;pwned\x07\x1b[2J",
    "a" * 5000,
]
# Raw JSON text put in place of a value: what json.dumps cannot write.
RAW_VALUES = ["NaN", "Infinity", "-Infinity", "1e999", "9" * 400, "[" * 200 + "]" * 200]


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


def clean(code: int, out: str, err: str) -> str | None:
    """Why an answer is not clean (a crash, a traceback, more than one line on a refusal, an escape sequence
    echoed), or None."""
    if "Traceback" in out + err:
        return "traceback"
    if code not in (0, 1, 2):
        return f"exit {code}"
    if code == 2 and len(err.strip().splitlines()) != 1:
        return f"{len(err.strip().splitlines())} lines on stderr"
    if "\x1b" in out + err or "\x07" in out + err:
        return "an escape sequence reached the terminal"
    return None


_NUMBER = re.compile(r"-?[\d,]+(?:\.\d+)?")


def report_nonsense(markdown: str) -> str | None:
    """Why a report that was written holds nonsense: a negative or non-finite figure in the step table, a rate
    above anything bench can send (100,000/s), or an escape sequence; None when it is sane."""
    if "\x1b" in markdown or "\x07" in markdown:
        return "an escape sequence in the report"
    for line in markdown.splitlines():
        if not line.startswith("| ") or "---" in line:
            continue
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        for c in cells:
            if re.search(r"\b(nan|inf|NaN|Infinity)\b", c):
                return f"a non-finite figure: {line[:120]}"
        if len(cells) == 11 and cells[0] != "setup":  # the step table
            per_min = cells[4].split(" ")[0]
            if per_min not in ("n/a",) and float(per_min.replace(",", "")) > 6_000_000:
                return f"answered/min above what bench can send: {line[:120]}"
            for c in cells[3:10]:
                if c.startswith("-"):
                    return f"a negative figure: {line[:120]}"
    return None


def _paths(x: Any, path: tuple = ()) -> Iterator[tuple]:
    yield path
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _paths(v, (*path, k))
    elif isinstance(x, list) and x:
        yield from _paths(x[0], (*path, 0))


def _set(doc: Any, path: tuple, value: Any) -> Any:
    doc = json.loads(json.dumps(doc))
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return doc


def run_json_paths(skip_workflow_definition: bool = True) -> list[tuple]:
    """Every field path of the base run.json (list items by their first), the workflow's own nodes left out (the
    workflows helper's parser owns them)."""
    doc = json.loads((BASE_RUN / "run.json").read_text())
    out = []
    for p in _paths(doc):
        if not p:
            continue
        if skip_workflow_definition and p[:3] == ("spec", "workflow_resolved", "definition") and len(p) > 4:
            continue
        out.append(p)
    return out


def _raw(doc: Any, path: tuple, raw: str) -> str:
    """The JSON text of `doc` with the value at `path` replaced by `raw` (text json.dumps would not write)."""
    marker = "__RAW_VALUE_MARKER__"
    return json.dumps(_set(doc, path, marker)).replace(f'"{marker}"', raw)


def _without_facts(doc: Any) -> Any:
    """`doc` with no host facts: `report` then has nothing to refit the advisor on (a refit takes seconds)."""
    doc = json.loads(json.dumps(doc))
    for host in (doc.get("hosts") or {}).values():
        if isinstance(host, dict):
            host.pop("facts", None)
    return doc


def run_json_cases(paths: list[tuple] | None = None, facts: bool = True) -> Iterator[tuple[str, str]]:
    """(name, run.json text): every path with every hostile value, plus raw values and whole-file damage. Without
    `facts`, every case but those of the facts themselves leaves the host facts out (see `_without_facts`)."""
    full = json.loads((BASE_RUN / "run.json").read_text())
    for path in paths if paths is not None else run_json_paths():
        name = ".".join(map(str, path))
        doc = full if facts or "facts" in path else _without_facts(full)
        for value in HOSTILE_VALUES:
            yield f"{name}={str(value)[:20]!r}", json.dumps(_set(doc, path, value))
        for raw in RAW_VALUES:
            yield f"{name}=raw:{raw[:12]}", _raw(doc, path, raw)
    doc = full if facts else _without_facts(full)
    whole = {
        "list": "[]",
        "string": '"run"',
        "deep": "[" * 100_000 + "]" * 100_000,
        "nul": '{"run_id": "a\x00"}',
        "truncated": json.dumps(doc)[:500],
        "empty": "",
        "extra key": json.dumps({**doc, "surprise": 1}),
        "finished before created": json.dumps({**doc, "finished_s": doc["created_s"] - 10}),
        "huge (9 MB)": json.dumps({**doc, "extra": {**doc["extra"], "pad": "x" * (9 << 20)}}),
    }
    yield from ((f"whole:{k}", v) for k, v in whole.items())


def _lines(name: str) -> list[dict]:
    return [json.loads(line) for line in (BASE_RUN / name).read_text().splitlines() if line.strip()]


def jsonl_cases(name: str) -> Iterator[tuple[str, str]]:
    """(case, file text) for requests.jsonl or samples.jsonl: every field of the first record with every hostile
    value and raw value, and damaged lines."""
    rows = _lines(name)
    first = rows[0]
    rest = "".join(json.dumps(r) + "\n" for r in rows[1:])
    for path in _paths(first):
        if not path:
            continue
        label = ".".join(map(str, path))
        for value in HOSTILE_VALUES:
            yield f"{label}={str(value)[:20]!r}", json.dumps(_set(first, path, value)) + "\n" + rest
        for raw in RAW_VALUES:
            yield f"{label}=raw:{raw[:12]}", _raw(first, path, raw) + "\n" + rest
    damage = {
        "binary line": "\x00\xff\n" + rest,
        "half line in the middle": json.dumps(first)[:40] + "\n" + rest,
        "deep line": "[" * 50_000 + "\n" + rest,
        "a list": "[1, 2]\n" + rest,
        "twice": json.dumps(first) + "\n" + json.dumps(first) + "\n" + rest,
    }
    yield from damage.items()


def schedule_cases() -> Iterator[tuple[str, str]]:
    """(case, requests.jsonl) whose records are each valid but together impossible."""
    rows = _lines("requests.jsonl")
    t0 = rows[0]["scheduled_s"]
    dense = [{**rows[0], "seq": i, "scheduled_s": t0, "sent_s": t0} for i in range(2000)]
    yield "2,000 requests at one instant of rate-4", "".join(json.dumps(r) + "\n" for r in dense)
    one = {**rows[0], "step": "c-10", "latency_ms": 0.0, "sent_s": rows[0]["scheduled_s"]}
    yield "one closed request answered in 0 ms", json.dumps(one) + "\n"
    yield "a rate of 10^9", json.dumps({**rows[0], "step": "rate-1000000000"}) + "\n"
    far = [
        {**rows[0], "step": "ramp-2-20"},
        {**rows[1], "step": "ramp-2-20", "scheduled_s": t0 + 1e9, "sent_s": t0 + 1e9},
    ]
    yield "a ramp over 30 years", "".join(json.dumps(r) + "\n" for r in far)
    one_user = [
        {**rows[0], "step": "c-1", "seq": i, "scheduled_s": t0 + i * 1e-7, "sent_s": t0 + i * 1e-7, "latency_ms": 1.0}
        for i in range(10_000)
    ]
    yield "10,000 requests of one user within 2 ms", "".join(json.dumps(r) + "\n" for r in one_user)
    burst = [{**rows[0], "step": "after", "seq": i, "sent_s": t0, "latency_ms": 5.0} for i in range(5000)]
    yield "5,000 requests of an unnamed step at one instant", "".join(json.dumps(r) + "\n" for r in burst)
    neg = {**rows[0], "latency_ms": -5}
    yield "latency -5 ms", json.dumps(neg) + "\n"


def load_summary_cases() -> Iterator[tuple[str, str]]:
    """(case, samples.jsonl) whose load summary contradicts itself."""
    rows = _lines("samples.jsonl")

    def with_value(metric: str, value: float) -> str:
        def hit(r: dict) -> bool:
            return r["metric"] == metric and r["labels"].get("step") in ("rate-4", None)

        return "".join(json.dumps({**r, "value": value} if hit(r) else r) + "\n" for r in rows)

    yield "answered_per_min 1e12", with_value("answered_per_min", 1e12)
    yield "answered above requests", with_value("answered", 1e6)
    yield "offered_rate 1e9", with_value("offered_rate", 1e9)
    yield "p50 above p99", with_value("latency_p50", 1e7)
    yield "saturated 7", with_value("saturated", 7)
    yield "500 cores on 2 vCPU", with_value("process_cpu_cores", 500)


def ledger_cases() -> Iterator[tuple[str, Any]]:
    """(case, a value for ledgers.local): broken arithmetic, wrong types, hostile numbers."""
    base = json.loads((BASE_RUN / "run.json").read_text())["ledgers"]["local"]
    yield "accepted above fired", {**base, "accepted": base["fired"] + 1}
    yield "refused negative", {**base, "refused": -1}
    yield "lost above fired", {**base, "accepted_then_lost": base["fired"] * 10}
    yield "succeeded above stored", {**base, "executions_succeeded": 10**9}
    yield "lost_seqs a string", {**base, "lost_seqs": "1,2"}
    yield "by_class a list", {**base, "by_class": [1]}
    yield (
        "by_class not adding up",
        {
            **base,
            "by_class": {"valid": {"fired": 1, "refused_as_expected": 0, "accepted": 1, "other": 0}},
        },
    )
    for key in base:
        for value in ("x", -1, 1e30, [], {}):
            yield f"{key}={value!r}", {**base, key: value}


def compose_cases() -> Iterator[tuple[str, str, str]]:
    """(case, compose text, what check must do: "refuse"), each a way a YAML file could make `check` judge something
    other than what Docker Compose runs."""
    golden = GOLDEN_COMPOSE.read_text()
    lines = golden.splitlines()
    main = next(i for i, line in enumerate(lines) if line.startswith("  n8n-main:"))
    image = next(i for i in range(main, len(lines)) if lines[i].strip().startswith("image:"))
    indent = lines[image][: len(lines[image]) - len(lines[image].lstrip())]

    def insert(at: int, *new: str) -> str:
        return "\n".join(lines[:at] + list(new) + lines[at:]) + "\n"

    yield "image twice (evil first)", insert(image, f"{indent}image: evil/evil:latest"), "refuse"
    yield "image twice (evil last)", insert(image + 1, f"{indent}image: evil/evil:latest"), "refuse"
    yield "environment twice", insert(image, f"{indent}environment:", f"{indent}  EXTRA: 1"), "refuse"
    services = lines.index("services:")
    yield "a service twice", insert(services + 1, "  n8n-main:", "    image: evil/evil:latest"), "refuse"
    yield "services twice", golden + "services:\n  evil:\n    image: evil/evil:latest\n", "refuse"
    yield "a second document", golden + "---\nservices:\n  evil:\n    image: evil/evil:latest\n", "refuse"
    yield "include", "include:\n  - other.yml\n" + golden, "refuse"
    yield "extends", insert(image, f"{indent}extends:", f"{indent}  service: n8n-worker-1"), "refuse"
    env_image = lines[:image] + [f"{indent}image: ${{IMAGE:-n8nio/n8n:2.41.1}}"] + lines[image + 1 :]
    yield "image from the environment", "\n".join(env_image) + "\n", "refuse"
    yield "a !reset tag", insert(image, f"{indent}ports: !reset []"), "refuse"
    yield "a !override tag", insert(image, f"{indent}environment: !override {{}}"), "refuse"
    yield (
        "merged anchors that disagree",
        "x-a: &a\n  image: evil/evil:latest\nx-b: &b\n  image: n8nio/n8n:2.41.1\n"
        + golden.replace("  n8n-main:\n", "  n8n-main:\n    <<: [*a, *b]\n", 1),
        "refuse",
    )
    yield (
        "a key twice through an alias",
        "x-k: &k image\n" + insert(image, f"{indent}*k : evil/evil:latest"),
        "refuse",
    )
    yield "a complex key", insert(image, f"{indent}? [a, b]", f"{indent}: c"), "refuse"


def compose_sibling_cases() -> Iterator[tuple[str, dict[str, str]]]:
    """(case, extra files beside docker-compose.yml) that make `docker compose up` in that folder run another file."""
    yield "compose.yaml beside", {"compose.yaml": "services: {}\n"}
    yield "an override file", {"docker-compose.override.yml": "services: {}\n"}
    yield "compose.override.yaml", {"compose.override.yaml": "services: {}\n"}
    yield "COMPOSE_FILE in .env", {".env": "COMPOSE_FILE=evil.yml\n"}


def url_cases() -> Iterator[str]:
    """--public-url values the grammar refuses."""
    yield from (
        "https://user:pass@n8n.example.com/",
        "https://user@n8n.example.com/",
        "http://n8n.example.com:99999/",
        "http://n8n.example.com:0/",
        "http://n8n.example.com:/",
        "ftp://n8n.example.com/",
        "http://n8n.example.com/\nN8N_ENCRYPTION_KEY=x",
        "http://n8n.example.com/\x1b[2J",
        "http://n8n .example.com/",
        "http://999.0.0.1/",
        "http:///",
        "http://n8n.example.com/?a=1",
        "http://n8n.example.com/${X}",
        "http://[::1/",
        "http://" + "a" * 3000 + ".example.com/",
        "javascript:alert(1)",
    )


def finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def folder_cases() -> Iterator[tuple[str, Callable[[Path], tuple[Path, Path]]]]:
    """(case, make(base) -> (--out to give, the folder nothing may be written into)): output folders another user
    could change, or that lead somewhere else. Other owners need root (chown); those cases are left out otherwise."""
    import grp
    import os

    def link_to_folder(base: Path) -> tuple[Path, Path]:
        (base / "target").mkdir()
        (base / "out").symlink_to(base / "target")
        return base / "out", base / "target"

    def under_a_link(base: Path) -> tuple[Path, Path]:
        (base / "target").mkdir()
        (base / "link").symlink_to(base / "target")
        return base / "link" / "out", base / "target"

    def dangling(base: Path) -> tuple[Path, Path]:
        (base / "out").symlink_to(base / "elsewhere")
        return base / "out", base

    def mode(bits: int) -> Callable[[Path], tuple[Path, Path]]:
        def make(base: Path) -> tuple[Path, Path]:
            (base / "out").mkdir()
            (base / "out").chmod(bits)
            return base / "out", base / "out"

        return make

    def open_parent(base: Path) -> tuple[Path, Path]:
        (base / "shared").mkdir()
        (base / "shared").chmod(0o777)  # no sticky bit: anyone may rename what is inside
        return base / "shared" / "out", base / "shared"

    def owned_by(uid: int, gid: int, bits: int = 0o755) -> Callable[[Path], tuple[Path, Path]]:
        def make(base: Path) -> tuple[Path, Path]:
            (base / "out").mkdir()
            os.chown(base / "out", uid, gid)
            (base / "out").chmod(bits)
            return base / "out", base / "out"

        return make

    yield "a link to a folder", link_to_folder
    yield "under a linked folder", under_a_link
    yield "a dangling link", dangling
    yield "world-writable (0777)", mode(0o777)
    yield "world-writable and sticky (1777)", mode(0o1777)
    yield "inside a world-writable folder", open_parent
    if os.geteuid() == 0:
        nogroup = grp.getgrnam("nogroup").gr_gid if "nogroup" in {g.gr_name for g in grp.getgrall()} else 65534
        yield "another user's (nobody)", owned_by(65534, nogroup)
        yield "group-writable, a shared group", owned_by(0, nogroup, 0o775)
