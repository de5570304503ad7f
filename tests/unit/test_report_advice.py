"""The report's closing section: the advisor refitted on the runs, for the rates they offered."""

from n8n_sizer.report.advice import TITLE, advice_section
from tests.unit.test_advise_cli import _write_run


def test_report_ends_with_the_refitted_advice_for_each_rate_tested(tmp_path):
    _write_run(tmp_path, answered_per_min=1800.0)  # saturated at 30/s on a 2-vCPU host, offered 40 and 60
    run = next(p.parent for p in tmp_path.glob("*/run.json"))
    text = advice_section([run])
    assert text.startswith(TITLE)
    rows = [line for line in text.splitlines() if line.startswith("| light | 2 vCPU x86 |")]
    assert [r.split("|")[3].strip() for r in rows] == ["40/s", "60/s"]
    assert all(r.split("|")[6].strip().startswith("no") for r in rows)  # 40 and 60/s are past the 30/s measured
    assert "2 step(s), 2 of them capacity points" in text


def test_runs_without_load_steps_say_there_is_nothing_to_refit(tmp_path):
    from n8n_sizer.runs.records import RunManifest
    from n8n_sizer.runs.store import RunStore

    store = RunStore.create(tmp_path, RunManifest(run_id="r1", created_s=1.0))
    store.close()
    assert "nothing to refit on" in advice_section([store.folder])
