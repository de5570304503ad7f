"""`advise --topology FILE [--on-this-machine]`: the user's own topology scored by the search's model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from n8n_sizer.advisor.answer.base import Request
from n8n_sizer.advisor.answer.contract import Roles
from n8n_sizer.advisor.answer.given import MACHINE_GROUP, GivenGroup, evaluate, given_layout
from n8n_sizer.advisor.capacity import HostShape
from n8n_sizer.advisor.catalog import find_size
from n8n_sizer.advisor.engine import build_advisor
from n8n_sizer.advisor.profiles import profile_for
from n8n_sizer.errors import InputError

BIN = Path(sys.executable).parent
LIGHT = profile_for("light", None, None)


@pytest.fixture(scope="module")
def advisor():
    return build_advisor(None)


def _groups(advisor, worker_hosts: int = 2, webhooks: int = 1) -> list[GivenGroup]:
    def group(name, count=1, **roles):
        size = find_size("cx33", "hetzner")
        return GivenGroup(
            name=name,
            provider="hetzner",
            size="cx33",
            count=count,
            roles=Roles(**roles),
            host=advisor.host_for_size(size),
            monthly_eur=size.monthly_eur,
        )

    return [
        group("data", postgres=1, redis=1),
        group("ingest", main=1, webhook=webhooks, load_balancer=1),
        group("worker", worker_hosts, workers=1),
    ]


def _advise(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "advise"), *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("rps", [40, 200])
def test_the_search_s_answer_scores_the_same_when_given_back(tmp_path: Path, rps: int) -> None:
    searched = _advise("--rps", str(rps), "--json")
    (tmp_path / "a.json").write_text(searched.stdout)
    given = _advise("--rps", str(rps), "--topology", str(tmp_path / "a.json"), "--json")
    assert given.returncode == 0, given.stderr
    a, b = json.loads(searched.stdout), json.loads(given.stdout)
    if a["hosts"] == 1 and not a["webhook_processors"]:  # a single-host answer has no topology to give back
        pytest.skip(f"--rps {rps} is answered by one host")
    assert b["capacity_per_s"] == pytest.approx(a["capacity_per_s"], rel=1e-9)
    assert b["bound"] == a["bound"] and b["feasible"] == a["feasible"]
    assert [g["roles"] for g in b["topology"]] == [g["roles"] for g in a["topology"]]
    assert b["monthly_eur"] == a["monthly_eur"] and b["request"]["topology"]["hosts"] == a["hosts"]


def test_more_worker_hosts_never_carry_less_and_too_few_say_so(advisor) -> None:
    req = Request(rps=60, profile=LIGHT)
    caps = []
    for n in (1, 2, 4, 8):
        rec = evaluate(advisor, req, given_layout(_groups(advisor, n), 10, 11), [])
        caps.append(rec.capacity_per_s.mid)
        assert rec.feasible == (60 < rec.capacity_per_s.mid), (n, rec.capacity_per_s)
        if not rec.feasible:
            assert rec.warnings[0].startswith("not sustainable: this topology carries about"), rec.warnings
            assert "more workers" in rec.warnings[0] and "--max-hosts" not in rec.warnings[0], rec.warnings
    assert caps == sorted(caps) and caps[0] < 60 < caps[-1], caps


def test_on_one_machine_every_role_shares_its_cores(advisor) -> None:
    req = Request(rps=5, profile=LIGHT)
    apart = evaluate(advisor, req, given_layout(_groups(advisor), 10, 11), [])
    machine = HostShape(vcpu=2.0, arch="x86", host_class="user:test-cpu")
    shared = evaluate(advisor, req, given_layout(_groups(advisor), 10, 11, machine), [])
    assert [g.name for g in shared.topology] == [MACHINE_GROUP] and shared.topology[0].vcpu == 2
    assert shared.topology[0].roles.counts() == {
        "main": 1,
        "webhook": 1,
        "workers": 2,
        "postgres": 1,
        "redis": 1,
        "load_balancer": 1,
    }
    # 4 hosts of 4 vCPU each carry more than their roles squeezed onto 2 cores, which bind as one host
    assert shared.capacity_per_s.mid < apart.capacity_per_s.mid
    assert shared.bound.name == "host" and shared.bound.host == MACHINE_GROUP
    # no run from that CPU is in the embedded fit: the answer says whose speed it assumed
    assert any("test-cpu" in w and "--results" in w for w in shared.warnings), shared.warnings
    assert shared.request["topology"] == {"hosts": 1, "machine_vcpu": 2.0}


def test_a_second_webhook_processor_on_the_same_cores_adds_no_capacity_when_the_cores_bind(advisor) -> None:
    machine = HostShape(vcpu=2.0, arch="x86", host_class="user:test-cpu")
    req = Request(rps=5, profile=LIGHT)
    one, two = (evaluate(advisor, req, given_layout(_groups(advisor, 2, w), 10, 11, machine), []) for w in (1, 2))
    assert two.capacity_per_s.mid <= one.capacity_per_s.mid  # the second one only adds its idle CPU


@pytest.mark.parametrize(
    "roles, needle",
    [
        ({"main": 1, "postgres": 1, "redis": 1}, "at least one worker"),
        ({"main": 1, "webhook": 2, "workers": 1, "postgres": 1, "redis": 1}, "load balancer"),
    ],
)
def test_topologies_the_model_cannot_score_are_refused(advisor, roles, needle) -> None:
    size = find_size("cx33", "hetzner")
    group = GivenGroup(
        name="app",
        provider="hetzner",
        size="cx33",
        count=1,
        roles=Roles(**roles),
        host=advisor.host_for_size(size),
        monthly_eur=size.monthly_eur,
    )
    with pytest.raises(InputError, match=needle):
        given_layout([group], 10, 11)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--on-this-machine"], "--on-this-machine puts every host"),
        (["--topology", "nowhere.json"], "--topology nowhere.json: no such file"),
        (["--topology", "t.json", "--vcpu", "4"], "--topology scores the topology in the file, so --vcpu"),
        (["--topology", "t.json", "--max-hosts", "3"], "so --max-hosts would be ignored"),
        (["--topology", "bad.json"], "--topology bad.json is not JSON"),
    ],
)
def test_bad_topology_input_is_one_line_exit_2(tmp_path: Path, args, needle) -> None:
    (tmp_path / "t.json").write_text(
        json.dumps(
            {
                "topology": [
                    {
                        "name": "app",
                        "provider": "hetzner",
                        "size": "cx33",
                        "roles": {"main": 1, "workers": 1, "postgres": 1, "redis": 1},
                    }
                ]
            }
        )
    )
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "regular.json").write_text(
        json.dumps(
            {
                "topology": [
                    {
                        "name": "app",
                        "provider": "hetzner",
                        "size": "cx33",
                        "roles": {"main": 1, "postgres": 1, "redis": 1},
                    }
                ]
            }
        )
    )
    p = subprocess.run(
        [str(BIN / "advise"), "--rps", "10", *args], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and needle in p.stderr, p.stderr


def test_on_this_machine_uses_this_machine_s_cores(tmp_path: Path) -> None:
    import os

    (tmp_path / "lab.json").write_text(
        json.dumps(
            {
                "topology": [
                    {"name": "data", "provider": "hetzner", "size": "cx33", "roles": {"postgres": 1, "redis": 1}},
                    {
                        "name": "ingest",
                        "provider": "hetzner",
                        "size": "cx33",
                        "roles": {"main": 1, "webhook": 2, "load_balancer": 1},
                    },
                    {"name": "worker", "provider": "hetzner", "size": "cx33", "count": 2, "roles": {"workers": 1}},
                ]
            }
        )
    )
    p = _advise("--rps", "4", "--topology", str(tmp_path / "lab.json"), "--on-this-machine", "--json")
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["topology"][0]["vcpu"] == os.cpu_count() and data["webhook_processors"] == 2 and data["workers"] == 2
    human = _advise("--rps", "4", "--topology", str(tmp_path / "lab.json"), "--on-this-machine")
    assert f"the given topology's 4 host(s) sharing this machine's {os.cpu_count()} vCPU" in human.stdout, human.stdout[
        :400
    ]
    assert data["request"]["topology"] == {"hosts": 4, "machine_vcpu": os.cpu_count()}


def _lab_file(tmp_path: Path, worker_hosts: int) -> Path:
    from n8n_sizer.bundle.topology import parse_topology
    from n8n_sizer.lab.cpu import plan_for_topology

    doc = {
        "topology": [
            {"name": "ls-data", "provider": "hetzner", "size": "cx23", "roles": {"postgres": 1, "redis": 1}},
            {"name": "ls-ingest", "provider": "hetzner", "size": "cx23", "roles": {"main": 1}},
            {
                "name": "ls-worker",
                "provider": "hetzner",
                "size": "cx23",
                "count": worker_hosts,
                "roles": {"workers": 1},
            },
        ],
        "subnet": "10.89.0.0/24",
        "concurrency": 10,
    }
    topo = parse_topology(doc)
    cpu = plan_for_topology(topo, "abc123", cores=0.1071 * sum(h.vcpu for h in topo.hosts()))
    path = tmp_path / f"lab-{worker_hosts}.json"
    path.write_text(json.dumps({"lab": {"topology": doc, "cpu": cpu.model_dump(mode="json")}}))
    return path


def test_a_lab_with_cpu_budgets_is_scored_host_by_host_and_one_more_worker_host_adds_capacity(tmp_path: Path) -> None:
    caps = []
    for n in (1, 2):
        p = subprocess.run(
            [
                str(BIN / "advise"),
                "--rps",
                "1",
                "--topology",
                str(_lab_file(tmp_path, n)),
                "--on-this-machine",
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert p.returncode == 0, p.stderr
        data = json.loads(p.stdout)
        assert data["hosts"] == 2 + n and len(data["topology"]) == 2 + n  # each host its own budget, not merged
        assert data["bound"]["host"].startswith("ls-worker")  # the worker hosts bind, as measured on the lab
        caps.append(data["capacity_per_s"]["mid"])
    assert 1.7 < caps[1] / caps[0] < 2.1  # docs/lab.md: 3.69 -> 7.30/s (1.98x)
