"""Issue 12, defects 3 and 4: teardown destroys only this project's stack, and no sweep deletes what is not
its own, even when the provider API ignores the label selector (the local fake API is made to)."""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from n8n_sizer.fleet.reaper import reap, teardown_stack
from n8n_sizer.fleet.sweep_gcp import GcpSweeper
from n8n_sizer.fleet.sweep_hetzner import HetznerSweeper
from tests.infra.provider_api import TOKEN, ProviderServer

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
PAST = "2020-01-01t00-00z"  # the CLI reads the real clock


def labels(stack: str, owner: str = "bench", project: str = "n8n-sizer", expires: str = PAST) -> dict[str, str]:
    return {"project": project, "stack": stack, "owner": owner, "role": "target", "expires-at": expires}


@pytest.fixture
def server():
    with ProviderServer() as srv:
        srv.state.ignore_label_selector = True
        yield srv


def hetzner(srv: ProviderServer) -> HetznerSweeper:
    return HetznerSweeper(token=TOKEN, base_url=srv.hetzner_url, sleep=lambda _s: None)


def servers_left(srv: ProviderServer) -> set[str]:
    return {s["name"] for s in srv.state.hetzner["servers"].values()}


def populate(srv: ProviderServer) -> None:
    add = srv.state.add_hetzner
    add("servers", "mine", labels("single"))
    add("servers", "teammate-same-stack", labels("single", owner="carol"))
    add("servers", "unlabelled", {})
    add("servers", "other-project-expired", labels("single", project="shop"))
    add("servers", "other-stack", labels("single-2"))
    add("firewalls", "fw-unlabelled", {})


def test_teardown_deletes_only_its_own_stack_when_the_api_ignores_the_selector(server) -> None:
    populate(server)
    report = teardown_stack(
        "single", stacks_dir=ROOT / "stacks", destroy=lambda *_: None, sweepers=[hetzner(server)], owner="bench"
    )
    assert servers_left(server) == {"teammate-same-stack", "unlabelled", "other-project-expired", "other-stack"}
    assert [o.resource.name for o in report.outcomes if o.action == "deleted"] == ["mine"]
    assert {f["name"] for f in server.state.hetzner["firewalls"].values()} == {"fw-unlabelled"}


def test_teardown_for_every_owner_still_keeps_other_projects_and_stacks(server) -> None:
    populate(server)
    teardown_stack("single", stacks_dir=ROOT / "stacks", destroy=lambda *_: None, sweepers=[hetzner(server)])
    assert servers_left(server) == {"unlabelled", "other-project-expired", "other-stack"}


def test_reap_keeps_other_projects_and_teammates_when_the_api_ignores_the_selector(server) -> None:
    populate(server)
    reap(now=NOW, sweepers=[hetzner(server)], owner="bench")
    assert servers_left(server) == {"teammate-same-stack", "unlabelled", "other-project-expired"}
    reap(now=NOW, sweepers=[hetzner(server)])  # --all-owners: the teammate's expired server goes too
    assert servers_left(server) == {"unlabelled", "other-project-expired"}


def test_delete_all_keeps_a_resource_whose_labels_do_not_match(server) -> None:
    server.state.add_hetzner("servers", "unlabelled", {})
    sweeper = hetzner(server)
    found = sweeper.list("servers", "")  # an empty selector lists everything
    outcomes = sweeper.delete_all(found, "project=n8n-sizer,stack=single")
    assert [o.action for o in outcomes] == ["kept"] and servers_left(server) == {"unlabelled"}


def test_gcp_teardown_respects_owner_when_the_api_ignores_the_filter(server) -> None:
    server.state.add_gcp("instances", "n8n-sizer-single-t0", "zones/europe-west3-a", labels=labels("single"))
    server.state.add_gcp(
        "instances", "n8n-sizer-single-t1", "zones/europe-west3-a", labels=labels("single", owner="carol")
    )
    server.state.add_gcp("instances", "shop-db", "zones/europe-west3-a", labels={})
    sweeper = GcpSweeper(project="test-project", token=TOKEN, base_url=server.gcp_url, sleep=lambda _s: None)
    teardown_stack("single", stacks_dir=ROOT / "stacks", destroy=lambda *_: None, sweepers=[sweeper], owner="bench")
    assert set(server.state.gcp["instances"]) == {"n8n-sizer-single-t1", "shop-db"}


# --- the CLI: which folder teardown may destroy in, --dry-run, owner flags -------------------------------


def fake_pulumi(bin_dir: Path) -> Path:
    """A `pulumi` on PATH that only records that it ran."""
    marker = bin_dir / "pulumi-ran"
    script = bin_dir / "pulumi"
    script.write_text(f'#!/bin/sh\necho "$@" > {marker}\n')
    script.chmod(0o755)
    return marker


def run_cli(args: list[str], *, cwd: Path, bin_dir: Path, env: dict[str, str], monkeypatch, capsys):
    from n8n_sizer.cli import main

    for var in (
        "HCLOUD_TOKEN",
        "GOOGLE_OAUTH_ACCESS_TOKEN",
        "N8N_SIZER_HCLOUD_URL",
        "N8N_SIZER_GCP_COMPUTE_URL",
        "N8N_SIZER_OWNER",
    ):
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin:/bin")
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", ["n8n-sizer", *args])
    with pytest.raises(SystemExit) as exit_:
        main()
    out, err = capsys.readouterr()
    return exit_.value.code, out, err


def project(tmp_path: Path, name: str, stacks: dict[str, str]) -> Path:
    folder = tmp_path / "project"
    (folder / "stacks").mkdir(parents=True)
    (folder / "Pulumi.yaml").write_text(f"name: {name}\nruntime: python\nstackConfigDir: stacks\n")
    for stack, text in stacks.items():
        (folder / "stacks" / f"Pulumi.{stack}.yaml").write_text(text)
    return folder


SINGLE = (ROOT / "stacks" / "Pulumi.single.yaml").read_text()


def test_teardown_refuses_another_pulumi_project(server, tmp_path, monkeypatch, capsys) -> None:
    populate(server)
    folder = project(tmp_path, "shop", {"single": SINGLE})
    marker = fake_pulumi(tmp_path)
    code, out, err = run_cli(
        ["teardown", "--stack", "single"],
        cwd=folder,
        bin_dir=tmp_path,
        monkeypatch=monkeypatch,
        capsys=capsys,
        env={"HCLOUD_TOKEN": TOKEN, "N8N_SIZER_HCLOUD_URL": server.hetzner_url},
    )
    assert code == 2 and len(err.strip().splitlines()) == 1 and "'shop'" in err and "Traceback" not in err
    assert not marker.exists() and not server.state.requests("DELETE")


def test_teardown_refuses_a_stack_without_its_file(server, tmp_path, monkeypatch, capsys) -> None:
    folder = project(tmp_path, "n8n-sizer", {})
    marker = fake_pulumi(tmp_path)
    code, _, err = run_cli(
        ["teardown", "--stack", "single"],
        cwd=folder,
        bin_dir=tmp_path,
        monkeypatch=monkeypatch,
        capsys=capsys,
        env={"HCLOUD_TOKEN": TOKEN, "N8N_SIZER_HCLOUD_URL": server.hetzner_url},
    )
    assert code == 2 and "Pulumi.single.yaml does not exist" in err and len(err.strip().splitlines()) == 1
    assert not marker.exists()


def test_teardown_refuses_a_folder_without_pulumi_yaml(server, tmp_path, monkeypatch, capsys) -> None:
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.single.yaml").write_text(SINGLE)
    marker = fake_pulumi(tmp_path)
    code, _, err = run_cli(
        ["teardown", "--stack", "single"],
        cwd=tmp_path,
        bin_dir=tmp_path,
        monkeypatch=monkeypatch,
        capsys=capsys,
        env={"HCLOUD_TOKEN": TOKEN, "N8N_SIZER_HCLOUD_URL": server.hetzner_url},
    )
    assert code == 2 and "Pulumi.yaml: no such file" in err and not marker.exists()


def test_teardown_in_this_project_runs_pulumi_then_sweeps_only_the_owner(server, tmp_path, monkeypatch, capsys):
    populate(server)
    folder = project(tmp_path, "n8n-sizer", {"single": SINGLE})
    marker = fake_pulumi(tmp_path)
    code, out, err = run_cli(
        ["teardown", "--stack", "single"],
        cwd=folder,
        bin_dir=tmp_path,
        monkeypatch=monkeypatch,
        capsys=capsys,
        env={"HCLOUD_TOKEN": TOKEN, "N8N_SIZER_HCLOUD_URL": server.hetzner_url},
    )
    assert code == 0, err
    assert marker.read_text().split() == ["destroy", "--yes", "--stack", "single"]
    assert "teammate-same-stack" in servers_left(server) and "mine" not in servers_left(server)


def test_teardown_dry_run_lists_and_changes_nothing(server, tmp_path, monkeypatch, capsys) -> None:
    populate(server)
    folder = project(tmp_path, "n8n-sizer", {"single": SINGLE})
    marker = fake_pulumi(tmp_path)
    code, out, err = run_cli(
        ["teardown", "--stack", "single", "--dry-run"],
        cwd=folder,
        bin_dir=tmp_path,
        monkeypatch=monkeypatch,
        capsys=capsys,
        env={"HCLOUD_TOKEN": TOKEN, "N8N_SIZER_HCLOUD_URL": server.hetzner_url},
    )
    assert code == 0, err
    assert "would run `pulumi destroy --yes --stack single`" in out
    assert "would-delete  hetzner server mine" in out and "teammate-same-stack" not in out
    assert not marker.exists() and not server.state.requests("DELETE") and len(servers_left(server)) == 5


def test_reap_needs_an_owner_or_all_owners(server, tmp_path, monkeypatch, capsys) -> None:
    populate(server)
    env = {"HCLOUD_TOKEN": TOKEN, "N8N_SIZER_HCLOUD_URL": server.hetzner_url}
    code, _, err = run_cli(["reap"], cwd=tmp_path, bin_dir=tmp_path, monkeypatch=monkeypatch, capsys=capsys, env=env)
    assert code == 2 and "--owner" in err and "--all-owners" in err and not server.state.requests("DELETE")
    code, _, err = run_cli(
        ["reap"],
        cwd=tmp_path,
        bin_dir=tmp_path,
        monkeypatch=monkeypatch,
        capsys=capsys,
        env={**env, "N8N_SIZER_OWNER": "bench"},
    )
    assert code == 0, err
    assert servers_left(server) == {"teammate-same-stack", "unlabelled", "other-project-expired"}


ODDITIES = {
    "non-ASCII token": ({"HCLOUD_TOKEN": "tökén"}, 2, "HCLOUD_TOKEN is not a usable API token"),
    "token with a newline": ({"HCLOUD_TOKEN": "abc\ndef"}, 2, "HCLOUD_TOKEN is not a usable API token"),
    "malformed URL": ({"HCLOUD_TOKEN": TOKEN, "N8N_SIZER_HCLOUD_URL": "ht!tp://[::1"}, 2, "N8N_SIZER_HCLOUD_URL"),
    "URL without a host": ({"HCLOUD_TOKEN": TOKEN, "N8N_SIZER_HCLOUD_URL": "http://"}, 2, "N8N_SIZER_HCLOUD_URL"),
}


@pytest.mark.parametrize("env,code,text", ODDITIES.values(), ids=ODDITIES.keys())
def test_provider_oddities_are_one_line(env, code, text, tmp_path, monkeypatch, capsys) -> None:
    got, _, err = run_cli(
        ["reap", "--owner", "bench", "--provider", "hetzner"],
        cwd=tmp_path,
        bin_dir=tmp_path,
        monkeypatch=monkeypatch,
        capsys=capsys,
        env=env,
    )
    assert got == code and text in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    "item",
    [
        {"name": "no-id", "labels": labels("single")},
        {"id": None, "name": "x"},
        {"id": "12; rm", "name": "x"},
        "just a string",
        42,
    ],
)
def test_a_listing_without_an_id_is_one_line_exit_1(item, server, tmp_path, monkeypatch, capsys) -> None:
    server.state.hetzner["servers"][1] = item
    code, _, err = run_cli(
        ["reap", "--owner", "bench", "--provider", "hetzner"],
        cwd=tmp_path,
        bin_dir=tmp_path,
        monkeypatch=monkeypatch,
        capsys=capsys,
        env={"HCLOUD_TOKEN": TOKEN, "N8N_SIZER_HCLOUD_URL": server.hetzner_url},
    )
    assert code == 1 and "without a numeric id" in err and len(err.strip().splitlines()) == 1
    assert not server.state.requests("DELETE")
