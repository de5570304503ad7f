"""Issue 24: the cluster path (`render --topology`, `check --topology`) reads and writes through the one
guarded path, and its secrets never rotate. Each test fails on the code before the fix.

Everything runs through the real entry point (`n8n_sizer.cli.main`) on files the test creates in tmp_path.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from n8n_sizer.bundle.secrets import parse_env_text

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGIES = ROOT / "tests" / "data" / "topologies"
HOSTS = ("core", "edge", "hooks-1", "hooks-2", "worker")  # lb-apart.json's hosts
KEY = "N8N_ENCRYPTION_KEY"


def cli(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    from n8n_sizer.cli import main

    monkeypatch.setattr(sys, "argv", ["n8n-sizer", *map(str, args)])
    with pytest.raises(SystemExit) as exit_:
        main()
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return exit_.value.code, out, err


def refused(code: int, err: str, *words: str) -> None:
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("n8n-sizer: "), err
    for word in words:
        assert word in err, (word, err)


@pytest.fixture
def rendered(tmp_path, monkeypatch, capsys) -> Path:
    out = tmp_path / "cluster"
    code, _, err = cli(
        monkeypatch,
        capsys,
        "render",
        "--topology",
        TOPOLOGIES / "lb-apart.json",
        "--out",
        out,
        "--public-url",
        "http://n8n.example.com:5678/",
    )
    assert code == 0, err
    return out


def keys_in(out: Path) -> set[str]:
    """Every N8N_ENCRYPTION_KEY any copy holds (.secrets.env and each n8n host's .env)."""
    found = {parse_env_text((out / ".secrets.env").read_text())[KEY]}
    for host in HOSTS:
        env = parse_env_text((out / host / ".env").read_text())
        if KEY in env:
            found.add(env[KEY])
    return found


def snapshot(out: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file() and not p.is_symlink()
    }


def render_again(out, monkeypatch, capsys, *extra):
    return cli(
        monkeypatch,
        capsys,
        "render",
        "--topology",
        TOPOLOGIES / "lb-apart.json",
        "--out",
        out,
        "--public-url",
        "http://n8n.example.com:5678/",
        *extra,
    )


# ---- secrets never rotate ---------------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["deleted", "emptied", "lowercased"])
def test_a_damaged_secrets_env_never_regenerates_the_key_the_hosts_hold(rendered, monkeypatch, capsys, damage):
    (old,) = keys_in(rendered)
    shared = rendered / ".secrets.env"
    lines = shared.read_text().splitlines()
    edited = {
        "deleted": [l for l in lines if not l.startswith(KEY)],
        "emptied": [f"{KEY}=" if l.startswith(KEY) else l for l in lines],
        "lowercased": [l.replace(KEY, KEY.lower()) for l in lines],
    }[damage]
    shared.write_text("\n".join(edited) + "\n")
    code, out, err = render_again(rendered, monkeypatch, capsys)
    assert code == 0, err
    assert keys_in(rendered) == {old}  # the hosts' key came back into .secrets.env; nothing new was made
    assert "new secret" not in out


def test_a_host_env_with_another_key_is_a_conflict_refused_and_nothing_changes(rendered, monkeypatch, capsys):
    env = rendered / "worker" / ".env"
    env.write_text(env.read_text().replace(KEY + "=", KEY + "=ffff" * 4 + "x"))
    before = snapshot(rendered)
    code, _, err = render_again(rendered, monkeypatch, capsys)
    refused(code, err, KEY, "differs", "worker/.env")
    assert snapshot(rendered) == before


def test_generate_missing_secrets_is_honoured_and_still_keeps_every_held_one(rendered, monkeypatch, capsys):
    (old,) = keys_in(rendered)
    (rendered / ".secrets.env").unlink()
    for host in HOSTS:
        (rendered / host / ".env").unlink()
    # the cloud-init files still hold the key: kept, not regenerated, with or without the flag
    code, _, err = render_again(rendered, monkeypatch, capsys, "--generate-missing-secrets")
    assert code == 0, err
    assert keys_in(rendered) == {old}


def test_single_host_keeps_the_key_cloud_init_holds_when_env_is_deleted(tmp_path, monkeypatch, capsys):
    out = tmp_path / "one"
    assert cli(monkeypatch, capsys, "render", "--mode", "queue", "--out", out)[0] == 0
    old = parse_env_text((out / ".env").read_text())[KEY]
    (out / ".env").unlink()
    code, said, err = cli(monkeypatch, capsys, "render", "--mode", "queue", "--out", out)
    assert code == 0, err
    assert parse_env_text((out / ".env").read_text())[KEY] == old
    assert "cloud-init.yaml" in said


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_secrets_file_others_can_read_is_not_adopted(rendered, monkeypatch, capsys, mode):
    (rendered / ".secrets.env").chmod(mode)
    before = snapshot(rendered)
    code, _, err = render_again(rendered, monkeypatch, capsys)
    refused(code, err, "chmod 600", ".secrets.env")
    assert snapshot(rendered) == before


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_secrets_file_of_another_user_is_not_adopted(rendered, monkeypatch, capsys):
    os.chown(rendered / "core" / ".env", 65534, 65534)
    code, _, err = render_again(rendered, monkeypatch, capsys)
    refused(code, err, "belongs to user id 65534")


# ---- writes never follow a link -----------------------------------------------------------------------------


def test_a_planted_manifest_link_is_replaced_never_written_through(rendered, tmp_path, monkeypatch, capsys):
    victim = tmp_path / "victim.txt"
    victim.write_text("someone else's file\n")
    (rendered / "topology.json").unlink()
    (rendered / "topology.json").symlink_to(victim)
    assert render_again(rendered, monkeypatch, capsys)[0] == 0
    assert victim.read_text() == "someone else's file\n"
    assert not (rendered / "topology.json").is_symlink()


def test_a_dangling_manifest_link_creates_nothing_at_its_target(rendered, tmp_path, monkeypatch, capsys):
    target = tmp_path / "created-by-link"
    (rendered / "topology.json").unlink()
    (rendered / "topology.json").symlink_to(target)
    assert render_again(rendered, monkeypatch, capsys)[0] == 0
    assert not target.exists()


@pytest.mark.parametrize("dangling", [False, True])
def test_a_symlinked_host_folder_is_refused_and_nothing_lands_in_its_target(tmp_path, monkeypatch, capsys, dangling):
    out, elsewhere = tmp_path / "cluster", tmp_path / "elsewhere"
    out.mkdir()
    if not dangling:
        elsewhere.mkdir()
    (out / "worker").symlink_to(elsewhere, target_is_directory=True)
    code, _, err = render_again(out, monkeypatch, capsys)
    refused(code, err, "symbolic link")
    assert not elsewhere.exists() or not any(elsewhere.iterdir())


def test_previous_compose_keeps_the_users_mode(rendered, monkeypatch, capsys):
    compose = rendered / "core" / "docker-compose.yml"
    compose.write_text(compose.read_text() + "# my edit\n")
    compose.chmod(0o600)
    assert render_again(rendered, monkeypatch, capsys)[0] == 0
    previous = rendered / "core" / "docker-compose.yml.previous"
    assert previous.read_text().endswith("# my edit\n")
    assert stat.S_IMODE(previous.stat().st_mode) == 0o600


# ---- nothing is read that is not a regular file -------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("where", [".secrets.env", "worker/.env", "core/cloud-init.yaml", "topology.json"])
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_fifos_and_devices_are_refused_never_read(rendered, monkeypatch, capsys, where, kind):
    path = rendered / where
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    if where == "topology.json":  # render replaces the manifest; check is what reads it
        code, _, err = cli(monkeypatch, capsys, "check", "--topology", rendered)
        refused(code, err, "topology.json")
        return
    code, _, err = render_again(rendered, monkeypatch, capsys)
    refused(code, err, where.split("/")[-1])
    code, _, err = cli(monkeypatch, capsys, "check", "--topology", rendered)
    assert code in (0, 1, 2) and len(err.strip().splitlines()) <= 1  # check reads only what it needs


@pytest.mark.timeout(60)
def test_a_fifo_as_the_topology_file_is_refused(tmp_path, monkeypatch, capsys):
    fifo = tmp_path / "advice.json"
    os.mkfifo(fifo)
    for command in (
        ["render", "--topology", fifo, "--out", tmp_path / "o"],
        ["advise", "--rps", "40", "--topology", fifo],
    ):
        code, _, err = cli(monkeypatch, capsys, *command)
        refused(code, err, "not a regular file")


# ---- flags a mode would ignore ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flag",
    [
        ["--n8n-version", "2.41.1"],
        ["--max-connections", "300"],
        ["--concurrency", "5"],
        ["--runner-concurrency", "3"],
        ["--pool", "4"],
        ["--production-limit", "10"],
        ["--db", "postgres"],
        ["--longest-execution-s", "60"],
        ["--mode", "queue"],
        ["--workers", "2"],
    ],
)
def test_render_topology_refuses_every_flag_it_would_ignore(tmp_path, monkeypatch, capsys, flag):
    code, _, err = cli(
        monkeypatch, capsys, "render", "--topology", TOPOLOGIES / "lb-apart.json", "--out", tmp_path / "o", *flag
    )
    refused(code, err, flag[0], "would be ignored")
    assert not (tmp_path / "o").exists()


# ---- bounded topology inputs --------------------------------------------------------------------------------


def _topology(**changes) -> str:
    doc = json.loads((TOPOLOGIES / "lb-apart.json").read_text())
    doc.update(changes)
    return json.dumps(doc)


HOSTILE_TOPOLOGIES = {
    "5000-digit number": _topology().replace('"concurrency": 10', '"concurrency": ' + "9" * 5000),
    "5000-digit float": _topology().replace('"concurrency": 10', '"concurrency": 1' + "0" * 5000 + ".5"),
    "100,000 brackets": "[" * 100_000 + "]" * 100_000,
    "nested object": '{"topology": ' + "[" * 5000 + "]" * 5000 + "}",
    "NaN": _topology().replace('"concurrency": 10', '"concurrency": NaN'),
    "garbage subnet": _topology(subnet="banana"),
    "host bits": _topology(subnet="10.89.0.7/24"),
    "ipv6": _topology(subnet="fd00::/64"),
    "loopback": _topology(subnet="127.0.0.0/24"),
    "any": _topology(subnet="0.0.0.0/24"),
    "link-local": _topology(subnet="169.254.0.0/24"),
    "public": _topology(subnet="8.8.8.0/24"),
    "subnet not a string": _topology(subnet=["10.0.0.0/24"]),
    "huge subnet string": _topology(subnet="1" * 100_000),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(HOSTILE_TOPOLOGIES))
def test_hostile_topologies_are_one_line_everywhere(tmp_path, monkeypatch, capsys, name):
    path = tmp_path / "advice.json"
    path.write_text(HOSTILE_TOPOLOGIES[name])
    for command in (
        ["render", "--topology", path, "--out", tmp_path / "o"],
        ["advise", "--rps", "40", "--topology", path],
    ):
        code, _, err = cli(monkeypatch, capsys, *command)
        refused(code, err, "--topology")
    assert not (tmp_path / "o").exists()


def test_a_private_subnet_is_accepted(tmp_path, monkeypatch, capsys):
    path = tmp_path / "advice.json"
    path.write_text(_topology(subnet="192.168.40.0/24"))
    assert (
        cli(
            monkeypatch,
            capsys,
            "render",
            "--topology",
            path,
            "--out",
            tmp_path / "o",
            "--public-url",
            "http://n8n.example.com:5678/",
        )[0]
        == 0
    )


@pytest.mark.parametrize("subnet", ["banana", "fd00::/64", "127.0.0.0/24", "0.0.0.0/24", "10.89.0.7/24", 5])
def test_check_refuses_a_hand_edited_manifest_subnet(rendered, monkeypatch, capsys, subnet):
    manifest = json.loads((rendered / "topology.json").read_text())
    manifest["subnet"] = subnet
    (rendered / "topology.json").write_text(json.dumps(manifest))
    code, _, err = cli(monkeypatch, capsys, "check", "--topology", rendered)
    refused(code, err, "topology.json", "subnet")


@pytest.mark.parametrize("kind", ["file", "other-user"])
def test_a_bad_host_folder_is_refused_before_anything_is_written(tmp_path, monkeypatch, capsys, kind):
    out = tmp_path / "cluster"
    out.mkdir()
    if kind == "file":
        (out / "worker").write_text("not a folder\n")
    else:
        if os.geteuid() != 0:
            pytest.skip("chown to another user needs root")
        (out / "worker").mkdir()
        os.chown(out / "worker", 65534, 65534)
    code, _, err = render_again(out, monkeypatch, capsys)
    refused(code, err, "worker")
    assert sorted(p.name for p in out.iterdir()) == ["worker"]  # not even .secrets.env


def test_a_rewritten_compose_file_keeps_the_users_mode(rendered, monkeypatch, capsys):
    compose = rendered / "core" / "docker-compose.yml"
    compose.chmod(0o600)
    assert render_again(rendered, monkeypatch, capsys)[0] == 0
    assert stat.S_IMODE(compose.stat().st_mode) == 0o600
