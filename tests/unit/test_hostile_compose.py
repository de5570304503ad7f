"""`check` judges the file Docker Compose would run, or refuses (issue 40).

Before: `image:` twice in `n8n-main` (first `evil/evil:latest`, then the pinned image) passed, because PyYAML keeps
the last of two keys while Compose refuses the file. Every way found for a YAML file to make `check` judge
something else is refused here with one line that names the file (and, for a key, the key and its line): duplicate
keys at any depth, merges that disagree, Compose's own tags, a second document, `include:`, `extends:`, an image
from the environment, and in the file's folder a compose file Compose prefers, an override file or COMPOSE_FILE.
What both readers agree on (a merge whose keys the mapping overrides, anchors and aliases) still works.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from n8n_sizer.bundle.composefile import load_compose
from n8n_sizer.errors import InputError
from n8n_sizer.safety.yamldoc import load_yaml
from tests.unit.hostile_cases import GOLDEN_COMPOSE, clean, compose_cases, compose_sibling_cases, run_cli

CASES = list(compose_cases())


def test_the_golden_compose_file_is_judged(tmp_path) -> None:
    file = tmp_path / "docker-compose.yml"
    shutil.copy(GOLDEN_COMPOSE, file)
    code, out, err = run_cli("check", file)
    # judged: only its unset ${VAR}s fail (no --env)
    assert code == 1 and re.search(r"\n\d+ passed, 1 failed", out) and "FAIL  variables" in out, out + err


@pytest.mark.parametrize(("name", "text"), [(n, t) for n, t, _ in CASES], ids=[n for n, _, _ in CASES])
def test_a_file_compose_would_read_otherwise_is_refused_in_one_line(tmp_path, name, text) -> None:
    file = tmp_path / "docker-compose.yml"
    file.write_text(text)
    code, out, err = run_cli("check", file)
    assert clean(code, out, err) is None and code == 2, (name, code, out, err)
    assert str(file) in err, err


def test_a_duplicate_key_names_the_key_and_both_lines(tmp_path) -> None:
    name, text, _ = CASES[0]
    file = tmp_path / "docker-compose.yml"
    file.write_text(text)
    code, _, err = run_cli("check", file)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "evil/evil" in t)
    assert code == 2 and "'image' appears twice" in err and f"line {line}" in err and "services.n8n-main" in err


@pytest.mark.parametrize(("name", "files"), list(compose_sibling_cases()))
def test_a_folder_where_compose_would_run_another_file_is_refused(tmp_path, name, files) -> None:
    file = tmp_path / "docker-compose.yml"
    shutil.copy(GOLDEN_COMPOSE, file)
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    code, out, err = run_cli("check", file)
    assert clean(code, out, err) is None and code == 2, (name, out, err)
    assert "docker compose" in err


def test_a_file_named_with_f_is_judged_whatever_lies_beside_it(tmp_path) -> None:
    """`docker compose -f my-stack.yml` reads that file alone: no default or override file applies."""
    file = tmp_path / "my-stack.yml"
    shutil.copy(GOLDEN_COMPOSE, file)
    (tmp_path / "docker-compose.override.yml").write_text("services: {}\n")
    code, out, err = run_cli("check", file)
    assert code == 1 and re.search(r"\n\d+ passed, 1 failed", out) and "FAIL  variables" in out, out + err


@pytest.mark.parametrize("order", ["merge first", "merge last"])
def test_a_key_written_in_the_mapping_wins_over_a_merge_as_in_compose(order) -> None:
    """yaml.v3 (Compose's parser) and PyYAML agree: an explicit key overrides a merged one, wherever it stands."""
    body = ["    <<: *base", "    image: n8nio/n8n:2.41.1"]
    text = "x-base: &base\n  image: evil/evil:latest\n  restart: always\nservices:\n  n8n-main:\n" + "\n".join(
        body if order == "merge first" else body[::-1]
    )
    compose = load_compose(text + "\n")
    (service,) = compose.services
    assert service.image == "n8nio/n8n:2.41.1"


def test_plain_scalars_are_read_as_compose_reads_them() -> None:
    """YAML 1.2, like yaml.v3: `22:22` is a port mapping, not the base-60 number 1342; `on`/`no` stay text."""
    doc = load_yaml("ports: [22:22, 5678:5678]\nenv: {A: on, B: no, C: true, D: 0755}\n", "x", fix="-")
    assert doc == {"ports": ["22:22", "5678:5678"], "env": {"A": "on", "B": "no", "C": True, "D": 493}}
    compose = load_compose("services:\n  s:\n    image: caddy:2\n    ports:\n      - 22:22\n")
    assert [p.container_port for p in compose.services[0].ports] == [22]


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\nb: {c: 1, c: 2}\n",
        "a:\n  - {x: 1}\n  - x: 1\n    x: 2\n",
        "a: 1\na: 1\n",
    ],
)
def test_duplicate_keys_are_refused_at_any_depth_in_any_yaml(text) -> None:
    with pytest.raises(InputError) as caught:
        load_yaml(text, "stack file s.yaml", fix="fix it")
    assert "appears twice" in str(caught.value) and "stack file s.yaml" in str(caught.value)


def test_a_stack_file_with_a_key_twice_is_refused_by_cost(tmp_path) -> None:
    root = Path(__file__).resolve().parents[2]
    (tmp_path / "stacks").mkdir()
    (tmp_path / "Pulumi.yaml").write_text("name: n8n-sizer\n")
    text = (root / "stacks" / "Pulumi.single.yaml").read_text() + "config:\n  n8n-sizer:owner: evil\n"
    (tmp_path / "stacks" / "Pulumi.dup.yaml").write_text(text)
    code, out, err = run_cli("cost", "--stack", "dup", "--stacks-dir", tmp_path / "stacks")
    assert clean(code, out, err) is None and code == 2 and "appears twice" in err, err


def test_check_topology_names_the_host_file_with_a_duplicate_key(tmp_path) -> None:
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "cluster"
    advice = root / "tests" / "data" / "topologies" / "lb-apart.json"
    assert run_cli("render", "--topology", advice, "--out", out, "--public-url", "http://n8n.example.com:5678/")[0] == 0
    compose = out / "worker" / "docker-compose.yml"
    lines = compose.read_text().splitlines()
    services = lines.index("services:")
    lines[services + 1 : services + 1] = ["  evil:", "    image: evil/evil:latest", "  evil:", "    image: x"]
    compose.write_text("\n".join(lines) + "\n")
    code, out_text, err = run_cli("check", "--topology", out)
    assert code == 2 and str(compose) in err and "'evil' appears twice" in err, err
