"""Teardown and reap against a local HTTP server that speaks the Hetzner and GCP endpoints they use."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from n8n_sizer.fleet.api import ProviderApiError
from n8n_sizer.fleet.reaper import reap, run_pulumi_destroy, teardown_stack
from n8n_sizer.fleet.sweep_gcp import GcpSweeper
from n8n_sizer.fleet.sweep_hetzner import HetznerSweeper
from tests.infra.provider_api import TOKEN, Fault, ProviderServer

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
PAST, FUTURE = "2026-12-01t10-00z", "2026-12-01t14-00z"


def labels(stack: str, role: str, expires: str = FUTURE) -> dict[str, str]:
    return {"project": "n8n-sizer", "stack": stack, "owner": "bench", "role": role, "expires-at": expires}


def no_pulumi(stack: str, project_dir: Path):
    return run_pulumi_destroy(stack, project_dir, pulumi_bin="pulumi-is-not-installed-here")


@pytest.fixture
def server():
    with ProviderServer() as srv:
        yield srv


def add_hetzner_stack(
    srv: ProviderServer, stack: str, targets: int, expires: str = FUTURE, network: bool = False
) -> dict[str, list[int]]:
    st = srv.state
    fw_lg = st.add_hetzner("firewalls", f"n8n-sizer-{stack}-loadgen", labels(stack, "fleet", expires))
    fw_t = st.add_hetzner("firewalls", f"n8n-sizer-{stack}-targets", labels(stack, "fleet", expires))
    key = st.add_hetzner("ssh_keys", f"n8n-sizer-{stack}-ssh", labels(stack, "fleet", expires))
    servers = [
        st.add_hetzner("servers", f"n8n-sizer-{stack}-loadgen", labels(stack, "loadgen", expires), firewall_ids=[fw_lg])
    ]
    servers += [
        st.add_hetzner("servers", f"n8n-sizer-{stack}-t{i}", labels(stack, "target", expires), firewall_ids=[fw_t])
        for i in range(targets)
    ]
    ids = {"servers": servers, "firewalls": [fw_lg, fw_t], "ssh_keys": [key], "networks": []}
    if network:  # a cluster stack's private network carries the same labels and goes last
        ids["networks"].append(st.add_hetzner("networks", f"n8n-sizer-{stack}-net", labels(stack, "fleet", expires)))
    return ids


def hetzner(srv: ProviderServer, sleeps: list[float]) -> HetznerSweeper:
    return HetznerSweeper(token=TOKEN, base_url=srv.hetzner_url, sleep=sleeps.append)


def test_hetzner_teardown_deletes_the_stack_only_after_retries_and_in_order(server):
    mine = add_hetzner_stack(server, "single", targets=4, network=True)  # 5 servers: three pages of 2
    other = add_hetzner_stack(server, "single-2", targets=1, network=True)  # shares the name prefix, not the label
    server.state.faults += [
        Fault("GET", "/hetzner/servers", 429, times=1),
        Fault("DELETE", f"/hetzner/servers/{mine['servers'][2]}", 503, times=1),
    ]
    sleeps: list[float] = []
    report = teardown_stack("single", stacks_dir=ROOT / "stacks", destroy=no_pulumi, sweepers=[hetzner(server, sleeps)])

    assert not report.destroy.ok and "not on PATH" in report.destroy.message
    assert report.failed == [] and report.count("deleted") == 5 + 2 + 1 + 1
    left = {kind: set(items) for kind, items in server.state.hetzner.items()}
    assert left == {kind: set(ids) for kind, ids in other.items()}
    log = server.state.log
    pages = [q["page"][0] for m, p, q in log if m == "GET" and p == "/hetzner/servers" and "page" in q]
    assert {"1", "2", "3"} <= set(pages)
    # Firewalls go only after the servers using them have vanished: no 422 was ever answered.
    first_fw_delete = next(i for i, (m, p, _) in enumerate(log) if m == "DELETE" and p.startswith("/hetzner/firewalls"))
    last_server_delete = max(i for i, (m, p, _) in enumerate(log) if m == "DELETE" and p.startswith("/hetzner/servers"))
    assert first_fw_delete > last_server_delete
    assert len(sleeps) >= 2  # the 429 and the 503 were each retried after a pause


def test_hetzner_teardown_is_idempotent(server):
    add_hetzner_stack(server, "single", targets=1)
    sleeps: list[float] = []
    first = teardown_stack("single", stacks_dir=ROOT / "stacks", destroy=no_pulumi, sweepers=[hetzner(server, sleeps)])
    again = teardown_stack("single", stacks_dir=ROOT / "stacks", destroy=no_pulumi, sweepers=[hetzner(server, sleeps)])
    assert first.count("deleted") == 5 and again.found == 0


def test_firewall_still_in_use_is_retried_then_reported_not_hidden(server):
    ids = add_hetzner_stack(server, "single", targets=1)
    # A server outside the sweep keeps using the stack's firewall: its delete can never succeed.
    server.state.add_hetzner("servers", "someone-else", {"project": "other"}, firewall_ids=[ids["firewalls"][1]])
    report = teardown_stack("single", stacks_dir=ROOT / "stacks", destroy=no_pulumi, sweepers=[hetzner(server, [])])
    failed = [(o.resource.kind, int(o.resource.id)) for o in report.failed]
    assert failed == [("firewalls", ids["firewalls"][1])]
    assert (
        "DELETE /firewalls" in report.failed[0].detail and "HTTP 422 Firewall still applied" in report.failed[0].detail
    )
    assert set(server.state.hetzner["firewalls"]) == {ids["firewalls"][1]}


def test_server_errors_that_never_stop_give_a_clean_error(server):
    server.state.faults.append(Fault("GET", "/hetzner/servers", 503, times=-1))
    sleeps: list[float] = []
    with pytest.raises(ProviderApiError) as err:
        hetzner(server, sleeps).find("project=n8n-sizer")
    assert str(err.value).startswith("Hetzner API GET /servers still failed after 6 attempts: HTTP 503")
    assert sleeps == [0.5, 1.0, 2.0, 4.0, 8.0]  # exponential backoff between the six attempts


def test_a_wrong_token_is_a_clean_error_naming_the_variable(server):
    sweeper = HetznerSweeper(token="wrong", base_url=server.hetzner_url, sleep=lambda s: None)
    with pytest.raises(ProviderApiError, match=r"HTTP 401 .*check HCLOUD_TOKEN"):
        sweeper.find("project=n8n-sizer")


def test_hetzner_reap_deletes_only_what_expired(server):
    expired = add_hetzner_stack(server, "old", targets=1, expires=PAST)
    alive = add_hetzner_stack(server, "new", targets=1, expires=FUTURE)
    odd = server.state.add_hetzner("servers", "odd", {"project": "n8n-sizer", "expires-at": "tomorrow"})
    dry = reap(now=NOW, dry_run=True, sweepers=[hetzner(server, [])])
    assert dry.count("would-delete") == 5 and dry.count("kept") == 1 and dry.count("deleted") == 0
    assert len(server.state.hetzner["servers"]) == 5  # a dry run deletes nothing

    done = reap(now=NOW, sweepers=[hetzner(server, [])])
    assert done.count("deleted") == 5 and not done.failed
    assert set(server.state.hetzner["servers"]) == set(alive["servers"]) | {odd}
    assert not set(expired["firewalls"]) & set(server.state.hetzner["firewalls"])
    assert reap(now=NOW, sweepers=[hetzner(server, [])]).count("deleted") == 0  # idempotent


def add_gcp_stack(srv: ProviderServer, stack: str, expires: str = FUTURE, instances: int = 3) -> None:
    desc = "n8n-sizer fleet: " + " ".join(f"{k}={v}" for k, v in labels(stack, "fleet", expires).items())
    net, sub = f"n8n-sizer-{stack}-net", f"n8n-sizer-{stack}-subnet"
    srv.state.add_gcp("networks", net, "global", description=desc)
    srv.state.add_gcp("subnetworks", sub, "regions/europe-west3", network=net, description=desc)
    for suffix in ("ssh", "n8n"):
        srv.state.add_gcp("firewalls", f"n8n-sizer-{stack}-{suffix}", "global", network=net, description=desc)
    for i in range(instances):
        zone = "zones/europe-west3-a" if i % 2 else "zones/europe-west3-b"
        srv.state.add_gcp(
            "instances", f"n8n-sizer-{stack}-h{i}", zone, subnetwork=sub, labels=labels(stack, "target", expires)
        )


def gcp(srv: ProviderServer) -> GcpSweeper:
    return GcpSweeper(project="test-project", token=TOKEN, base_url=srv.gcp_url, sleep=lambda s: None)


def test_gcp_teardown_deletes_instances_then_rules_subnets_networks(server):
    add_gcp_stack(server, "gcp-e2")
    add_gcp_stack(server, "gcp-e2-x", instances=1)
    server.state.faults.append(Fault("GET", "/gcp/projects/test-project/aggregated/instances", 500, times=1))
    report = teardown_stack("gcp-e2", stacks_dir=ROOT / "stacks", destroy=no_pulumi, sweepers=[gcp(server)])
    assert report.failed == [] and report.count("deleted") == 3 + 2 + 1 + 1
    assert all(
        not name.startswith("n8n-sizer-gcp-e2-") or name.startswith("n8n-sizer-gcp-e2-x-")
        for kind in ("instances", "firewalls", "subnetworks", "networks")
        for name in server.state.gcp[kind]
    )
    assert len(server.state.gcp["instances"]) == 1
    kinds = [p.split("/")[-2] for p in server.state.requests("DELETE", "/gcp/")]
    assert kinds == sorted(kinds, key=["instances", "firewalls", "subnetworks", "networks"].index)
    again = teardown_stack("gcp-e2", stacks_dir=ROOT / "stacks", destroy=no_pulumi, sweepers=[gcp(server)])
    assert again.found == 0


def test_gcp_reap_keeps_the_network_of_a_stack_whose_instances_live_on(server):
    add_gcp_stack(server, "old", expires=PAST)
    add_gcp_stack(server, "extended", expires=PAST, instances=0)
    server.state.add_gcp(
        "instances",
        "n8n-sizer-extended-h0",
        "zones/europe-west3-a",
        subnetwork="n8n-sizer-extended-subnet",
        labels=labels("extended", "target", FUTURE),
    )
    report = reap(now=NOW, sweepers=[gcp(server)])
    assert report.failed == []
    left = {kind: sorted(items) for kind, items in server.state.gcp.items()}
    assert left["instances"] == ["n8n-sizer-extended-h0"]
    assert left["networks"] == ["n8n-sizer-extended-net"] and left["subnetworks"] == ["n8n-sizer-extended-subnet"]


def run_cli(*args: str, env: dict[str, str], tmp_path: Path, monkeypatch, capsys) -> tuple[int, str, str]:
    """The real CLI entry point, in-process: exit code, stdout, stderr."""
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
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no `pulumi`, whatever the machine has
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "argv", ["n8n-sizer", *args])
    with pytest.raises(SystemExit) as exit_:
        main()
    out, err = capsys.readouterr()
    return exit_.value.code, out, err


def test_cli_teardown_without_pulumi_exits_2_with_one_line_and_still_sweeps(server, tmp_path, monkeypatch, capsys):
    add_hetzner_stack(server, "single", targets=1)
    code, out, err = run_cli(
        "teardown",
        "--stack",
        "single",
        tmp_path=tmp_path,
        monkeypatch=monkeypatch,
        capsys=capsys,
        env={"HCLOUD_TOKEN": TOKEN, "N8N_SIZER_HCLOUD_URL": server.hetzner_url},
    )
    assert code == 2, err
    assert err.splitlines()[0].startswith("n8n-sizer: the pulumi CLI (pulumi) is not on PATH")
    assert "Traceback" not in err
    assert "stack single: found 5 (5 deleted" in out
    assert all(not items for items in server.state.hetzner.values())


def test_cli_reap_reports_a_permanent_failure_cleanly(server, tmp_path, monkeypatch, capsys):
    ids = add_hetzner_stack(server, "old", targets=1, expires="2020-01-01t00-00z")  # the CLI reads the real clock
    server.state.faults.append(
        Fault(
            "DELETE",
            f"/hetzner/ssh_keys/{ids['ssh_keys'][0]}",
            403,
            times=-1,
            body={"error": {"code": "forbidden", "message": "insufficient permissions"}},
        )
    )
    code, out, err = run_cli(
        "reap",
        "--provider",
        "hetzner",
        "--owner",
        "bench",
        tmp_path=tmp_path,
        monkeypatch=monkeypatch,
        capsys=capsys,
        env={"HCLOUD_TOKEN": TOKEN, "N8N_SIZER_HCLOUD_URL": server.hetzner_url},
    )
    assert code == 1, err
    assert "failed        hetzner ssh_key n8n-sizer-old-ssh" in out
    assert "HTTP 403 insufficient permissions; check HCLOUD_TOKEN" in out
    assert err.strip() == "n8n-sizer: 1 resource(s) could not be deleted; run reap again"
    assert list(server.state.hetzner["ssh_keys"]) == ids["ssh_keys"] and not server.state.hetzner["servers"]


def test_cli_reap_without_credentials_names_the_variables(tmp_path, monkeypatch, capsys):
    code, _, err = run_cli(
        "reap", "--owner", "bench", tmp_path=tmp_path, monkeypatch=monkeypatch, capsys=capsys, env={}
    )
    assert code == 2 and "Traceback" not in err
    assert "export HCLOUD_TOKEN" in err and "GOOGLE_OAUTH_ACCESS_TOKEN" in err
    assert len(err.strip().splitlines()) == 1


def test_cli_reap_json_is_one_object_of_what_would_go(server, tmp_path, monkeypatch, capsys):
    import json

    add_hetzner_stack(server, "old", targets=1, expires="2020-01-01t00-00z")
    code, out, err = run_cli(
        "reap",
        "--provider",
        "hetzner",
        "--owner",
        "bench",
        "--dry-run",
        "--json",
        tmp_path=tmp_path,
        monkeypatch=monkeypatch,
        capsys=capsys,
        env={"HCLOUD_TOKEN": TOKEN, "N8N_SIZER_HCLOUD_URL": server.hetzner_url},
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["dry_run"] and report["counts"]["would-delete"] == report["found"] == 5 and report["failed"] == 0
    assert {r["action"] for r in report["resources"]} == {"would-delete"}
    assert server.state.hetzner["servers"]  # a dry run deleted nothing
