"""The report's PNG plots, drawn with matplotlib from synthetic run folders (a few seconds: kept out of the
unit tests), and later from real local runs."""

from __future__ import annotations

import pytest

from n8n_sizer.report.build import build_report
from tests.unit.test_report import REGULAR, closed_sweep_requests, runs, write_run  # noqa: F401  (runs: fixture)

pytestmark = pytest.mark.integration


def test_report_with_plots_writes_readable_pngs(runs, tmp_path):
    result = build_report(runs, tmp_path / "report")
    names = sorted(p.name for p in result.images)
    assert names == sorted(
        [
            "answered_vs_offered.png",
            "latency_20261130t150000z-aaaaaa_cx33.png",
            "latency_20261130t160000z-bbbbbb_cx33-q.png",
            "timeseries_20261130t150000z-aaaaaa_cx33.png",
            "timeseries_20261130t160000z-bbbbbb_cx33-q.png",
        ]
    )
    sweep = write_run(tmp_path / "results", "sweep", "bench", REGULAR, "cx23", closed_sweep_requests(), [])
    result = build_report([*runs, sweep], tmp_path / "report")
    assert "throughput_vs_concurrency.png" in {p.name for p in result.images}
    for p in result.images:
        head = p.read_bytes()[:24]
        assert head[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
        assert width >= 600 and height >= 450
        assert f"]({p.name})" in result.markdown.read_text()


def test_report_from_a_real_local_queue_run(queue_stack, tmp_path):
    """A small real run: the open-model driver against real n8n (queue, 1 worker), this sampler on
    the stack's processes, the ledger from n8n's stored executions, then the report and its plots."""
    import asyncio
    import time

    from n8n_sizer.bench.http_post import HttpPost
    from n8n_sizer.bench.load import run_open
    from n8n_sizer.hosts.facts import host_facts
    from n8n_sizer.hosts.host import LocalHost
    from n8n_sizer.runs.ledger import build_ledger
    from n8n_sizer.runs.records import RunManifest
    from n8n_sizer.runs.store import RunStore, new_run_id
    from n8n_sizer.stack.sampling import local_stack_telemetry
    from n8n_sizer.telemetry.sampler import Sampler

    stack = queue_stack.stack
    workflow_id, url = queue_stack.deploy("light")
    setup = stack.setup.model_dump(mode="json")
    host = LocalHost()
    manifest = RunManifest(
        run_id=new_run_id(),
        kind="bench",
        created_s=time.time(),
        setup=setup,
        workflow="light",
        hosts={"local": {"setup": setup, "facts": host_facts(host).model_dump(mode="json")}},
    )
    store = RunStore.create(tmp_path / "results", manifest)
    with queue_stack.client(login=True) as editor:
        sampler = Sampler(
            host,
            store.append_samples,
            **local_stack_telemetry(stack, n8n_metrics=True),
            labels={"target": "local"},
            editor_check=lambda: editor.get_workflow_editor(workflow_id),
            editor_every_s=2.0,
        )
        with sampler:
            time.sleep(2)  # idle before the load, as seed 000's runs
            for rate in (2, 6):
                step = f"rate-{rate}"
                client = HttpPost(url, b'{"number": 21}', timeout_s=60)
                out = asyncio.run(
                    run_open(
                        client,
                        rate_per_s=rate,
                        duration_s=8,
                        max_in_flight=200,
                        step=step,
                        target="local",
                        seq_start=store.next_seq("local"),
                        sink=store.append_request,
                    )
                )
                store.mark_step("local", step, "done", started_s=out.started_s, finished_s=out.finished_s)
            time.sleep(2)
    with queue_stack.client() as api:
        counts = api.count_executions(workflow_id)
    ledger = build_ledger(store.read_requests(), counts.total, counts.by_status.get("success"))
    store.update_manifest(ledgers={"local": ledger}, finished_s=time.time())
    store.close()

    result = build_report([store.folder], tmp_path / "report")
    text = result.markdown.read_text()
    assert ledger.fired == 16 + 48 == ledger.accepted + ledger.refused and ledger.accepted_then_lost == 0
    records = store.read_requests()
    for rate, fired in ((2, 16), (6, 48)):
        ok = sum(1 for r in records if r.step == f"rate-{rate}" and r.status == 200)
        errors = fired - ok
        row = next(line for line in text.splitlines() if f"| rate-{rate} |" in line).split("|")
        # fired, answered per minute of the 8 s step, errors (a real run may have a few: they are shown)
        assert row[4].strip() == str(fired)
        # per minute of the step's real length: 8 s, a little more on a busy machine (CI saw 8.1 s: 355 for 360)
        shown = float(row[5].split("(")[0].replace(",", ""))  # "297 (did not keep up)" when the machine was busy
        assert shown == pytest.approx(ok * 60 / 8, rel=0.04, abs=1)
        assert row[6].strip().split(" ")[0] == str(errors)
        assert row[10].strip().endswith(("GB", "MB"))  # peak stack RAM measured
    assert {p.name.split("_")[0] for p in result.images} == {"answered", "latency", "timeseries"}
    # main's /metrics queue gauges, sampled from the real queue stack (seed 000's first alert reads them)
    gauges = {s.metric for s in store.read_samples() if s.labels.get("source") == "telemetry"}
    assert any("queue_jobs_waiting" in m or "jobs_waiting" in m for m in gauges), sorted(gauges)
    assert "### Alerts" in text and "| local | 3" not in text
