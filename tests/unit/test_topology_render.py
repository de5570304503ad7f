"""render --topology: golden files per host, Compose Specification and cloud-init schemas per host, the
one-host case equal to today's stack, one kept secret set, and the refusals.

Rewrite the goldens after an intended template change with
`UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit/test_topology_render.py` and review the diff.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.bundle.checks.all_hosts import check_topology
from n8n_sizer.bundle.cloudinit import USER_DATA_LIMIT_BYTES
from n8n_sizer.bundle.render import render_bundle
from n8n_sizer.bundle.render_topology import SECRETS_FILE, render_topology, write_topology
from n8n_sizer.bundle.secrets import StackSecrets, parse_env_text
from n8n_sizer.bundle.topology import load_topology_text, parse_topology
from n8n_sizer.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGIES = ROOT / "tests" / "data" / "topologies"
GOLDEN = ROOT / "tests" / "golden"
FAKE = StackSecrets(
    encryption_key="0123456789abcdef" * 4,
    postgres_password="golden-fake-postgres-password",
    redis_password="golden-fake-redis-password",
    runners_auth_token="golden-fake-runners-token",
    redis_n8n_password="golden-fake-redis-n8n-password",
)
CASES = ("advise-rps-400", "gcp-three-hosts", "lb-apart", "single-host")
FILES = {"docker-compose.yml": "compose", "env": "env", "cloud-init.yaml": "cloud_init"}
CLI = Path(sys.executable).parent / "n8n-sizer"
PUBLIC = "http://n8n.example.com:5678/"  # a cluster is called from outside: its URL is required, never localhost


def topology(case: str):
    return load_topology_text((TOPOLOGIES / f"{case}.json").read_text(), case)


def cluster(case: str):
    return render_topology(topology(case), FAKE, public_url=PUBLIC)


def _golden(path: Path, text: str) -> None:
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing golden {path}; run with UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), f"{path} differs; if intended, rerun with UPDATE_GOLDEN=1"


@pytest.mark.parametrize("case", CASES)
def test_every_host_matches_its_golden_files(case: str) -> None:
    rendered = cluster(case)
    for host, bundle in rendered.hosts.items():
        for name, attr in FILES.items():
            _golden(GOLDEN / f"cluster-{case}" / host / name, getattr(bundle, attr))
    _golden(GOLDEN / f"cluster-{case}" / "topology.json", rendered.manifest)


def test_advise_rps_400_gives_data_ingest_and_two_worker_hosts() -> None:
    rendered = cluster("advise-rps-400")
    assert list(rendered.hosts) == ["data", "ingest", "worker-1", "worker-2"]
    data = yaml.safe_load(rendered.hosts["data"].compose)["services"]
    assert set(data) == {"n8n-postgres", "n8n-redis"}
    assert data["n8n-postgres"]["ports"] == ["10.89.0.10:5432:5432"]
    assert data["n8n-redis"]["ports"] == ["10.89.0.10:6379:6379"]
    assert "max_connections=120" in data["n8n-postgres"]["command"]
    redis = data["n8n-redis"]["command"]
    assert redis[redis.index("--appendonly") + 1] == "yes" and "noeviction" in redis and "--requirepass" in redis
    ingest = yaml.safe_load(rendered.hosts["ingest"].compose)
    services = ingest["services"]
    assert services["n8n-main"]["environment"]["N8N_DISABLE_PRODUCTION_MAIN_PROCESS"] == "true"
    assert [services[f"n8n-webhook-{k}"]["command"] for k in (1, 2)] == ["webhook", "webhook"]
    assert not any("runner" in name and "webhook" in name for name in services)  # `n8n webhook` has no broker
    caddyfile = ingest["configs"]["caddyfile"]["content"]
    for path in ("/webhook/*", "/webhook-waiting/*", "/form/*", "/form-waiting/*"):
        assert f"handle {path} {{" in caddyfile
    worker = yaml.safe_load(rendered.hosts["worker-1"].compose)["services"]
    assert sorted(worker) == sorted(
        [f"n8n-worker-{k}" for k in range(1, 5)] + [f"runner-worker-{k}" for k in range(1, 5)]
    )
    assert worker["n8n-worker-1"]["environment"]["DB_POSTGRESDB_HOST"] == "10.89.0.10"
    assert worker["n8n-worker-1"]["environment"]["DB_POSTGRESDB_POOL_SIZE"] == "11"
    # The data host's .env holds only what Postgres and Redis need.
    assert set(parse_env_text(rendered.hosts["data"].env)) == {
        "POSTGRES_PASSWORD",
        "REDIS_PASSWORD",
        "REDIS_N8N_PASSWORD",
    }
    # n8n logs in to Redis as its ACL user: the default user's password stays on the data host.
    assert "REDIS_PASSWORD" not in parse_env_text(rendered.hosts["worker-1"].env)
    assert parse_env_text(rendered.hosts["worker-1"].env)["REDIS_N8N_PASSWORD"] == FAKE.redis_n8n_password
    assert worker["n8n-worker-1"]["environment"]["QUEUE_BULL_REDIS_USERNAME"] == "n8n"
    assert worker["n8n-worker-1"]["environment"]["QUEUE_BULL_REDIS_PASSWORD"] == "${REDIS_N8N_PASSWORD}"


@pytest.mark.parametrize("case", CASES)
def test_every_host_compose_passes_the_compose_spec(case: str, tmp_path: Path) -> None:
    tool = Path(sys.executable).parent / "check-jsonschema"
    assert tool.exists(), "check-jsonschema is missing: pip install -e '.[test]'"
    paths = []
    for host, bundle in cluster(case).hosts.items():
        path = tmp_path / f"{host}.yml"
        path.write_text(bundle.compose)
        paths.append(str(path))
    proc = subprocess.run(
        [str(tool), "--builtin-schema", "vendor.compose-spec", *paths], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("case", CASES)
def test_every_host_cloud_init_passes_debians_schema_and_quiets_apt(case: str, tmp_path: Path) -> None:
    tool = shutil.which("cloud-init")
    if tool is None:
        pytest.fail("Debian's cloud-init is not installed (scripts/test.sh installs it: apt-get install cloud-init)")
    for host, bundle in cluster(case).hosts.items():
        path = tmp_path / f"{host}.yaml"
        path.write_text(bundle.cloud_init)
        proc = subprocess.run([tool, "schema", "--config-file", str(path)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, (host, proc.stdout + proc.stderr)
        boot = str(yaml.safe_load(bundle.cloud_init)["bootcmd"])
        for unit in ("apt-daily.timer", "apt-daily-upgrade.timer", "unattended-upgrades", "apt-news", "packagekit"):
            assert unit in boot, (host, unit)
        assert len(bundle.cloud_init.encode()) <= USER_DATA_LIMIT_BYTES


@pytest.mark.parametrize("case", CASES)
def test_every_rendered_cluster_passes_check_topology(case: str, tmp_path: Path) -> None:
    write_topology(topology(case), tmp_path / "c", public_url=PUBLIC)
    results = check_topology(tmp_path / "c")
    assert [(r.rule, r.message) for r in results if r.status == "fail"] == []
    assert sum(r.status == "pass" for r in results) >= 10


def test_one_host_topology_renders_todays_single_host_stack() -> None:
    rendered = cluster("single-host")
    today = render_bundle(
        Setup(mode="queue", workers=2, concurrency=10, db_pool_size=2), FAKE, benchmark_host=True, public_url=PUBLIC
    )
    assert rendered.hosts == {"n8n": today}


def test_a_folder_rendered_before_the_redis_acl_user_gets_its_password_and_keeps_the_rest(tmp_path: Path) -> None:
    """REDIS_N8N_PASSWORD is new: nothing stored depends on it (Redis reads its users from its command line), so
    a folder that lacks it gets one without --generate-missing-secrets; every other secret is kept as it was."""
    out = tmp_path / "c"
    t = topology("advise-rps-400")
    write_topology(t, out, public_url=PUBLIC)
    before = parse_env_text((out / SECRETS_FILE).read_text())
    for path in [out / SECRETS_FILE, *(out / h / ".env" for h in ("data", "ingest", "worker-1", "worker-2"))]:
        old = "".join(
            line + "\n" for line in path.read_text().splitlines() if not line.startswith("REDIS_N8N_PASSWORD=")
        )
        path.write_text(old)
    for host in ("data", "ingest", "worker-1", "worker-2"):
        (out / host / "cloud-init.yaml").unlink()
    said = write_topology(t, out, public_url=PUBLIC)
    after = parse_env_text((out / SECRETS_FILE).read_text())
    assert after["REDIS_N8N_PASSWORD"] != before["REDIS_N8N_PASSWORD"] and len(after["REDIS_N8N_PASSWORD"]) == 48
    assert {k: v for k, v in after.items() if k != "REDIS_N8N_PASSWORD"} == {
        k: v for k, v in before.items() if k != "REDIS_N8N_PASSWORD"
    }
    assert any("new secret(s): REDIS_N8N_PASSWORD" in line for line in said)
    assert all(after["REDIS_N8N_PASSWORD"] not in line for line in said)
    # A missing encryption key is still refused without the flag.
    path = out / SECRETS_FILE
    path.write_text("".join(line + "\n" for line in path.read_text().splitlines() if not line.startswith("N8N_ENC")))
    for host in ("data", "ingest", "worker-1", "worker-2"):
        env_path = out / host / ".env"
        env_path.write_text(
            "".join(line + "\n" for line in env_path.read_text().splitlines() if not line.startswith("N8N_ENC"))
        )
        (out / host / "cloud-init.yaml").unlink()
    with pytest.raises(InputError, match="N8N_ENCRYPTION_KEY"):
        write_topology(t, out, public_url=PUBLIC)


def test_one_secret_set_written_0600_and_kept_on_re_render(tmp_path: Path) -> None:
    out = tmp_path / "c"
    t = topology("advise-rps-400")
    first = write_topology(t, out, public_url=PUBLIC)
    assert any("new secret(s)" in line for line in first)
    shared = parse_env_text((out / SECRETS_FILE).read_text())
    assert stat.S_IMODE((out / SECRETS_FILE).stat().st_mode) == 0o600
    for host in ("ingest", "worker-1", "worker-2"):
        assert parse_env_text((out / host / ".env").read_text())["N8N_ENCRYPTION_KEY"] == shared["N8N_ENCRYPTION_KEY"]
        assert stat.S_IMODE((out / host / ".env").stat().st_mode) == 0o600
        assert stat.S_IMODE((out / host / "cloud-init.yaml").stat().st_mode) == 0o600
    assert all(shared["N8N_ENCRYPTION_KEY"] not in line for line in first)
    again = write_topology(t, out)
    assert parse_env_text((out / SECRETS_FILE).read_text()) == shared
    assert any("kept 5 existing secret(s)" in line for line in again)
    # Without .secrets.env, the hosts' .env files are the source, and they must agree.
    (out / SECRETS_FILE).unlink()
    write_topology(t, out)
    assert parse_env_text((out / SECRETS_FILE).read_text()) == shared
    (out / SECRETS_FILE).unlink()
    env = out / "worker-2" / ".env"
    env.write_text(env.read_text().replace(shared["N8N_ENCRYPTION_KEY"], "f" * 64))
    with pytest.raises(InputError, match="N8N_ENCRYPTION_KEY differs between"):
        write_topology(t, out)


def _groups(**changes) -> dict:
    doc = json.loads((TOPOLOGIES / "advise-rps-400.json").read_text())
    doc.update(changes)
    return doc


@pytest.mark.parametrize(
    "change, message",
    [
        (
            {"max_connections": 100},
            "below what every process's pool needs: (main pool 2 + 1) + 2 webhook x pool 2 + 8 worker x pool 11",
        ),
        ({"db_pool_size": {"main": 2, "webhook": 2, "worker": 200}, "max_connections": None}, "need more RAM than"),
        (
            {
                "topology": [
                    {"name": "aa", "provider": "hetzner", "size": "cx33", "roles": {"main": 1, "postgres": 1}},
                    {
                        "name": "bb",
                        "provider": "hetzner",
                        "size": "cx33",
                        "roles": {"main": 1, "workers": 2, "redis": 1},
                    },
                ]
            },
            "2 n8n main processes",
        ),
        (
            {
                "topology": [
                    {
                        "name": "aa",
                        "provider": "hetzner",
                        "size": "cx33",
                        "roles": {"main": 1, "postgres": 1, "redis": 1, "webhook": 1},
                    },
                    {"name": "bb", "provider": "hetzner", "size": "cx33", "roles": {"workers": 2}},
                ]
            },
            "need a load balancer",
        ),
        (
            {
                "topology": [
                    {
                        "name": "aa",
                        "provider": "hetzner",
                        "size": "cx33",
                        "count": 2,
                        "roles": {"main": 1, "postgres": 1, "redis": 1, "workers": 1},
                    }
                ]
            },
            "exist once",
        ),
        (
            {"topology": [{"name": "aa", "provider": "hetzner", "size": "cx99", "roles": {"main": 1, "postgres": 1}}]},
            "unknown server size",
        ),
        (
            {
                "topology": [
                    {
                        "name": "aa",
                        "provider": "hetzner",
                        "size": "cx33",
                        "vcpu": 2,
                        "roles": {"main": 1, "postgres": 1},
                    }
                ]
            },
            "differs from cx33's 4 vCPU",
        ),
        (
            {
                "topology": [
                    {
                        "name": "aa",
                        "provider": "hetzner",
                        "size": "cx33",
                        "roles": {"main": 1, "postgres": 1, "redis": 1, "workers": 2, "webhook": 1},
                    }
                ]
            },
            "add hosts",
        ),
        (
            {"topology": [{"name": "A b", "provider": "hetzner", "size": "cx33", "roles": {"main": 1, "postgres": 1}}]},
            "not a host group name",
        ),
    ],
)
def test_bad_topologies_are_refused_with_the_fix(change: dict, message: str) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+")):
        render_topology(parse_topology(_groups(**change)), FAKE, public_url=PUBLIC)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(CLI), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )


def test_cli_render_then_check_topology(tmp_path: Path) -> None:
    out = tmp_path / "c"
    refused = _cli("render", "--topology", str(TOPOLOGIES / "advise-rps-400.json"), "--out", str(out))
    assert refused.returncode == 2 and "a cluster needs --public-url" in refused.stderr and not out.exists()
    assert len(refused.stderr.strip().splitlines()) == 1
    local = _cli(
        "render",
        "--topology",
        str(TOPOLOGIES / "advise-rps-400.json"),
        "--out",
        str(out),
        "--public-url",
        "http://127.0.0.1:5678/",
    )
    assert local.returncode == 2 and "this machine's own address" in local.stderr
    proc = _cli(
        "render", "--topology", str(TOPOLOGIES / "advise-rps-400.json"), "--out", str(out), "--public-url", PUBLIC
    )
    assert proc.returncode == 0, proc.stderr
    assert parse_env_text((out / "ingest" / ".env").read_text())["N8N_PUBLIC_URL"] == PUBLIC
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["data", "ingest", "worker-1", "worker-2"]
    checked = _cli("check", "--topology", str(out))
    assert checked.returncode == 0, checked.stdout
    assert "0 failed" in checked.stdout
    broken = _cli("check", "--topology", str(TOPOLOGIES / "broken-cluster-encryption-key"))
    assert broken.returncode == 1 and "FAIL  cluster-encryption-key" in broken.stdout


def test_cli_bad_topology_file_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "a.json"
    bad.write_text("{not json")
    proc = _cli("render", "--topology", str(bad), "--out", str(tmp_path / "c"))
    assert proc.returncode == 2 and "is not JSON" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "c").exists()
    mixed = _cli(
        "render", "--topology", str(TOPOLOGIES / "single-host.json"), "--mode", "queue", "--out", str(tmp_path / "d")
    )
    assert mixed.returncode == 2 and "drop --mode" in mixed.stderr


def test_production_profile_puts_tls_on_the_load_balancer_and_passes_check(tmp_path: Path) -> None:
    out = tmp_path / "c"
    write_topology(topology("advise-rps-400"), out, profile="production", domain="n8n.example.com")
    assert [(r.rule, r.message) for r in check_topology(out) if r.status == "fail"] == []
    ingest = yaml.safe_load((out / "ingest" / "docker-compose.yml").read_text())
    assert ingest["services"]["n8n-lb"]["ports"] == ["80:80", "443:443", "443:443/udp"]
    assert ingest["configs"]["caddyfile"]["content"].startswith("n8n.example.com {")
    assert {e["N8N_PROTOCOL"] for e in _n8n_envs(ingest)} == {"https"}
    assert parse_env_text((out / "ingest" / ".env").read_text())["N8N_PUBLIC_URL"] == "https://n8n.example.com/"
    tool = Path(sys.executable).parent / "check-jsonschema"
    proc = subprocess.run(
        [str(tool), "--builtin-schema", "vendor.compose-spec", str(out / "ingest" / "docker-compose.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout


def test_a_one_host_advice_with_per_role_pools_uses_the_worker_pool_everywhere() -> None:
    """Today's single-host stack has one pool setting: the larger worker pool covers main too."""
    doc = json.loads((TOPOLOGIES / "single-host.json").read_text())
    doc.update(db_pool_size={"main": 2, "webhook": 2, "worker": 11}, max_connections=120)
    rendered = render_topology(parse_topology(doc), FAKE)
    today = render_bundle(Setup(mode="queue", workers=2, db_pool_size=11), FAKE, max_connections=120)
    assert rendered.hosts["n8n"] == today
    assert json.loads(rendered.manifest)["max_connections"] == 120


def _n8n_envs(doc: dict) -> list[dict]:
    """The environment of every n8n process (main, webhook processor, worker) of one host's compose file."""
    return [
        svc["environment"]
        for name, svc in doc["services"].items()
        if name.startswith("n8n-") and "/n8n:" in svc["image"]
    ]


def test_n8n_behind_the_load_balancer_trusts_one_proxy_hop_in_every_profile() -> None:
    """Caddy sets X-Forwarded-For: without N8N_PROXY_HOPS main's rate limiter sees every client as Caddy
    (found bringing the bundles up under Docker: express-rate-limit's ValidationError at the first login)."""
    for case in ("advise-rps-400", "gcp-three-hosts", "lb-apart"):
        for host, bundle in cluster(case).hosts.items():
            for env in _n8n_envs(yaml.safe_load(bundle.compose)):
                assert env["N8N_PROXY_HOPS"] == "1", (case, host)
    doc = json.loads((TOPOLOGIES / "gcp-three-hosts.json").read_text())
    doc["topology"][1]["roles"] = {"main": 1}  # no webhook processors, no load balancer: main takes traffic
    for host, bundle in render_topology(parse_topology(doc), FAKE, public_url=PUBLIC).hosts.items():
        for env in _n8n_envs(yaml.safe_load(bundle.compose)):
            assert "N8N_PROXY_HOPS" not in env, host  # nothing in front: a forged header must not be trusted


def test_n8n_on_a_cluster_host_waits_minutes_for_the_data_host_not_seconds() -> None:
    """Hosts boot in no order: n8n's defaults (exit after 10 s without Redis, 5 Postgres attempts) failed
    `up --wait` on a worker host started 20 s before the data host (tests/docker/test_cluster_stack.py)."""
    for case in ("advise-rps-400", "gcp-three-hosts", "lb-apart"):
        for host, bundle in cluster(case).hosts.items():
            envs = _n8n_envs(yaml.safe_load(bundle.compose))
            if not envs:
                continue  # the data host runs no n8n
            env = envs[0]
            assert int(env["QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD"]) >= 120_000, (case, host)
            assert int(env["DB_STARTUP_CONNECT_MAX_RETRIES"]) >= 8, (case, host)  # 1+2+4+8+16+30... s
            # within the healthcheck's window: a process still retrying must not be counted unhealthy first
            check = yaml.safe_load(bundle.compose)["services"]
            n8n = [
                s
                for s in check.values()
                if "healthz" in str(s.get("healthcheck", {}).get("test")) and "5678" in str(s["healthcheck"]["test"])
            ]
            for spec in n8n:
                window_s = int(spec["healthcheck"]["interval"].rstrip("s")) * spec["healthcheck"]["retries"]
                assert int(env["QUEUE_BULL_REDIS_TIMEOUT_THRESHOLD"]) / 1000 < window_s, (case, host)
