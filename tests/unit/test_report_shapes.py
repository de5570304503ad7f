"""The report shows a burst: offered per second against answered per second, and the per-class ledger."""

from __future__ import annotations

from n8n_sizer.bench.shapes import arrival_times, parse_shape
from n8n_sizer.report.build import build_report
from n8n_sizer.runs.records import ClassTally, Ledger, RequestRecord, RunManifest
from n8n_sizer.runs.stats import per_second
from n8n_sizer.runs.store import RunStore

T0 = 1_764_000_000.0
CAPACITY_PER_S = 4.0  # the synthetic server answers at most this many per second, in order


def _burst_records() -> list[RequestRecord]:
    """burst:2:8:10:30 for 60 s against a server that serves 4/s first come first served: a backlog builds in
    each burst and drains after it."""
    out, free_at = [], T0
    for seq, t in enumerate(arrival_times(parse_shape("burst:2:8:10:30"), 60.0)):
        due = T0 + t
        free_at = max(free_at, due) + 1.0 / CAPACITY_PER_S
        out.append(
            RequestRecord(
                seq=seq,
                step="burst-2-8-10-30",
                target="local",
                scheduled_s=due,
                sent_s=due,
                status=200,
                latency_ms=(free_at - due) * 1000.0,
                execution_id=str(seq),
            )
        )
    return out


def test_per_second_shows_the_burst_and_the_trailing_answers():
    rows = per_second(_burst_records())
    assert [r[1] for r in rows[:10]] == [8] * 10 and rows[15][1] == 2
    assert sum(r[1] for r in rows) == sum(r[2] for r in rows) == 240
    assert max(r[2] for r in rows) <= CAPACITY_PER_S + 1  # answers capped near capacity while the burst offers 8/s
    assert rows[12][2] >= 3  # the backlog still being answered after the burst ended


def test_report_has_a_shape_plot_and_the_class_table(tmp_path):
    setup = {"mode": "queue", "workers": 1, "db": "postgres"}
    manifest = RunManifest(
        run_id="20261201T000000Z-burst",
        kind="bench",
        created_s=T0 - 30,
        finished_s=T0 + 120,
        setup={"local": setup},
        hosts={"local": {"setup": setup, "facts": {"vcpu": 2}}},
    )
    store = RunStore.create(tmp_path / "results", manifest)
    for r in _burst_records():
        store.append_request(r)
    by_class = {
        "valid": ClassTally(fired=235, refused_as_expected=0, accepted=235, other=0),
        "bad-signature": ClassTally(fired=5, refused_as_expected=5, accepted=0, other=0),
    }
    store.update_manifest(
        ledgers={
            "local": Ledger(
                fired=240, accepted=235, refused=5, accepted_then_lost=0, executions_stored=235, by_class=by_class
            )
        }
    )
    store.close()
    result = build_report([store.folder], tmp_path / "report")
    text = result.markdown.read_text()
    shape_png = [p for p in result.images if p.name.startswith("shape-")]
    assert len(shape_png) == 1 and "burst-2-8-10-30" in shape_png[0].name and shape_png[0].stat().st_size > 5000
    assert shape_png[0].name in text
    assert "| local | bad-signature | 5 | 5 | 0 | 0 |" in text
    assert "burst-2-8-10-30" in text  # the step's row in the table
