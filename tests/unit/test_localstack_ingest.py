"""Webhook processors behind Caddy in the local stack: the Caddyfile keeps the cluster render's routing with this
stack's loopback ports, and every wrong combination is refused before anything starts. Nothing here starts n8n
(tests/integration/test_localstack_webhook.py does)."""

from __future__ import annotations

import pytest

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.bundle.caddyfile import parse_routes, rebind_caddyfile, route_for
from n8n_sizer.errors import InputError
from n8n_sizer.native.ingest import local_caddyfile, rendered_ingest_caddyfile
from n8n_sizer.native.stack import LocalStack, StackOptions
from n8n_sizer.runs.stats import role_of
from tests.unit.test_bench_cli import one_line_exit_2


def test_local_caddyfile_routes_production_webhooks_to_the_processors_and_the_rest_to_main():
    text = local_caddyfile(41000, 41001, [41002, 41003], workers=1)
    assert text.startswith("{\n  admin off\n}\nhttp://127.0.0.1:41000 {\n  bind 127.0.0.1\n")
    routes = parse_routes(text)
    processors = ("127.0.0.1:41002", "127.0.0.1:41003")
    for path in ("/webhook/abc", "/webhook-waiting/1", "/form/x", "/form-waiting/2", "/mcp/tool"):
        route = route_for(routes, path)
        assert route.upstreams == processors and route.health_uri == "/healthz/drain", path
    for path in ("/webhook-test/abc", "/rest/login", "/api/v1/workflows", "/healthz"):
        route = route_for(routes, path)
        assert route.upstreams == ("127.0.0.1:41001",) and route.health_uri == "/healthz/readiness", path
    assert "respond 404" in text.split("@metrics", 2)[2].split("}", 1)[0]  # /metrics stays closed
    assert "n8n-" not in text  # no compose service name left


def test_the_routing_is_the_cluster_renders_not_a_copy():
    rendered = rendered_ingest_caddyfile(3, 2)
    local = local_caddyfile(5000, 5001, [5002, 5003, 5004], workers=2)
    # Same lines once the addresses are swapped back: only addresses differ.
    back = local.split("bind 127.0.0.1", 1)[1].replace("127.0.0.1:5001", "n8n-main:5678")
    for k, port in enumerate((5002, 5003, 5004), start=1):
        back = back.replace(f"127.0.0.1:{port}", f"n8n-webhook-{k}:5678")
    assert back == rendered[len(":5678 {") :]


def test_rebind_refuses_a_file_it_cannot_map():
    with pytest.raises(InputError, match="does not start with"):
        rebind_caddyfile("example.com {\n}\n", site="x", bind="y", main="m", webhook=str, admin="off")
    with pytest.raises(InputError, match="names an upstream"):
        rebind_caddyfile(
            ":5678 {\n  reverse_proxy n8n-other:5678\n}\n", site="x", bind="y", main="m", webhook=str, admin="off"
        )


def test_webhook_processors_need_queue_mode(tmp_path):
    with pytest.raises(InputError, match="--webhook-processors 2 needs queue mode"):
        LocalStack(Setup(mode="regular"), StackOptions(webhook_processors=2), stack_dir=tmp_path / "s")
    assert not (tmp_path / "s").exists()
    stack = LocalStack(Setup(mode="queue", workers=1), StackOptions(webhook_processors=2), stack_dir=tmp_path / "q")
    assert stack.webhook_names == ["webhook-1", "webhook-2"] and stack.uses_load_balancer
    assert LocalStack(Setup(mode="queue", workers=1), stack_dir=tmp_path / "n").webhook_names == []


def test_caddy_missing_is_one_line_before_anything_starts(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no caddy on PATH
    stack = LocalStack(
        Setup(mode="queue", workers=1),
        StackOptions(webhook_processors=1),
        stack_dir=tmp_path / "s",
        install=_fake_install(tmp_path),
    )
    with pytest.raises(InputError, match="apt-get install caddy"):
        stack.start()
    assert stack.processes == {} and not (tmp_path / "s").exists()


def _fake_install(tmp_path):
    from n8n_sizer.native.install import N8nInstall

    return N8nInstall(
        n8n_version="2.41.1", node_version="24.22.3", node_bin=tmp_path / "node", n8n_bin=tmp_path / "n8n"
    )


def test_telemetry_names_map_to_their_roles():
    assert role_of("webhook-2") == "webhook" and role_of("caddy") == "load_balancer" and role_of("main") == "main"


def test_bench_refuses_webhook_processors_outside_local_queue_mode(capsys, tmp_path):
    out = ["--out", str(tmp_path / "r")]
    one_line_exit_2(["--local", "--webhook-processors", "2", *out], capsys, "(webhook processors need queue mode)")
    one_line_exit_2(
        ["--local", "--mode", "queue", "--webhook-processors", "10", *out],
        capsys,
        "--webhook-processors 10 is outside the allowed range [0, 9]",
    )
    one_line_exit_2(
        ["--inventory", str(tmp_path / "i.json"), "--webhook-processors", "1", *out],
        capsys,
        "--webhook-processors 1 applies to a new --local --mode queue run",
    )
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())
