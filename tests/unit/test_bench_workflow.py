"""Workflow loading (webhook path per run, warm-up copy) and host facts parsing on captured output."""

from __future__ import annotations

from pathlib import Path

from n8n_sizer.hosts.facts import parse_facts
from n8n_sizer.n8n.client import WORKFLOW_CREATE_FIELDS, create_body
from n8n_sizer.n8n.workflows import load_bench_workflow
from n8n_sizer.stack.bringup import stack_kind_for

DATA = Path(__file__).parent.parent / "data"


def test_builtin_workflows_get_a_run_path_and_a_warmup_copy():
    flow = load_bench_workflow("code-heavy", run_tag="ab12cd")
    assert flow.webhook_path == "n8n-sizer-code-heavy-ab12cd" and flow.method == "POST"
    assert flow.body == b'{"number": 21}'
    warm = flow.copy_for("warmup")
    hook = lambda f: next(n for n in f.definition["nodes"] if n["type"] == "n8n-nodes-base.webhook")  # noqa: E731
    assert hook(warm)["parameters"]["path"] == "n8n-sizer-code-heavy-ab12cd-warmup"
    assert hook(warm)["webhookId"] != hook(flow)["webhookId"]
    assert set(create_body(flow.definition)) <= set(WORKFLOW_CREATE_FIELDS)
    assert create_body({**flow.definition, "id": "x", "active": True, "staticData": {"k": 1}})["staticData"] == {"k": 1}


def test_facts_parse_captured_output_and_keep_missing_as_none():
    facts = parse_facts((DATA / "bench_facts_debian12.txt").read_text())
    assert facts.vcpu == 2 and facts.arch == "x86_64" and facts.ram_mib > 1000 and facts.os.startswith("Debian")
    empty = parse_facts("vcpu=\ncpu_model=\nmem_kib=\n")
    assert empty.vcpu is None and empty.cpu_model is None and empty.ram_mib is None


def test_stack_kind_by_address():
    assert stack_kind_for("127.0.0.1") == "native-ssh" and stack_kind_for("203.0.113.7") == "compose"


def test_localstack_commands():
    from n8n_sizer.advisor.setup import Setup
    from n8n_sizer.stack.bringup import native_up_args

    args = native_up_args(Setup(mode="queue", workers=2, production_limit=5))
    assert "--mode queue --workers 2 --db postgres" in args and args.endswith("--production-limit 5")
    assert "--production-limit" not in native_up_args(Setup(mode="regular"))
