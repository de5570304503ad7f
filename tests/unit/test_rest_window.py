"""`bench --rest-seconds`: a window with no load after the warm-up, whose per-role CPU (the kernel's counts) is each
n8n process's idle CPU. It reaches the fit as `<role>-idle` rows, and the fitted idle CPU of an environment follows
what such rows measured there (the evidence decides, not the prior)."""

from __future__ import annotations

import pytest

from n8n_sizer.advisor.fit import fit_capacity, host_of, predict_demand
from n8n_sizer.advisor.measurements import load_embedded
from n8n_sizer.advisor.points import select_capacity_points, select_demand_rows
from n8n_sizer.bench.accounting import Reading, step_counters
from n8n_sizer.bench.plan import build_plan
from n8n_sizer.errors import InputError
from n8n_sizer.runs.fit_input import measurements_from_run
from n8n_sizer.runs.store import RunStore
from tests.unit.test_evidence import _bench_run


def _rested_run(tmp_path, run_id: str, main_ms: float, worker_ms: float, counted_s: float = 40.0):
    run = _bench_run(tmp_path, run_id, "light", 20, [4.0], 0)
    store = RunStore.open(run)
    hosts = dict(store.manifest.hosts)
    hosts["local"] = {
        **hosts["local"],
        "setup": {"mode": "queue", "workers": 2, "db": "postgres"},
        "facts": {**hosts["local"]["facts"], "cpu_model": f"Idle CPU {run_id[-3:]}"},
        "rest": step_counters(
            Reading(0.0, {("local", "main"): 0, ("local", "worker"): 0}, None, None),
            Reading(
                counted_s,
                {("local", "main"): int(main_ms * 1e6), ("local", "worker"): int(worker_ms * 1e6)},
                None,
                None,
            ),
        ).model_dump(mode="json", exclude_none=True),
    }
    store.update_manifest(hosts=hosts)
    store.close()
    return run


def test_a_rest_window_is_a_row_of_each_roles_idle_cores_per_process(tmp_path):
    run = _rested_run(tmp_path, "20261202T000000Z-aaa111", main_ms=400.0, worker_ms=1600.0)
    rows = measurements_from_run(run)
    (rest,) = [m for m in rows if m.load.kind == "idle"]
    # main: 400 ms over 40 s = 0.01 cores; the 2 workers share 1,600 ms: 0.02 cores each
    assert rest.results.idle_cores == pytest.approx({"main": 0.01, "worker": 0.02})
    assert rest.load.duration_s == 40.0 and rest.setup.workers == 2
    points, _ = select_capacity_points(rows, {"light"})
    assert rest.id not in {p.measurement.id for p in points}  # no load, no capacity
    idle = {r.role: r.cpu_s for r in select_demand_rows(rows) if r.idle}
    assert idle == pytest.approx({"main-idle": 0.01, "worker-idle": 0.02})


def test_a_run_without_a_rest_window_has_no_idle_row(tmp_path):
    run = _bench_run(tmp_path, "20261202T000000Z-bbb222", "light", 20, [4.0], 0)
    assert [m.load.kind for m in measurements_from_run(run)] == ["open"]


@pytest.mark.parametrize("cores", [0.004, 0.06])
def test_the_fitted_idle_cpu_of_an_environment_and_a_role_follows_its_rest_windows(tmp_path, cores):
    """Two rest windows of one new environment, an idle worker at a sixth of an idle main (as the lab measured):
    the fitted idle CPU per process lands on what they measured for each role, far below the middle figure or far
    above it, whichever they say."""
    worker = cores / 6.0
    runs = [
        _rested_run(tmp_path / str(i), f"20261202T00000{i}Z-ccc33{i}", cores * 40_000, 2 * worker * 40_000)
        for i in range(2)
    ]
    extra = [
        m.model_copy(update={"hardware": m.hardware.model_copy(update={"host_class": "user:idle-test"})})
        for run in runs
        for m in measurements_from_run(run)
        if m.load.kind == "idle"
    ]
    fitted = fit_capacity([*load_embedded(), *extra])
    idle_rows = [r for r in fitted.demand_rows if r.idle and r.measurement.hardware.host_class == "user:idle-test"]
    assert sorted(r.role for r in idle_rows) == ["main-idle", "main-idle", "worker-idle", "worker-idle"]
    for row in idle_rows:
        assert predict_demand(fitted.model, row) == pytest.approx(row.cpu_s, rel=0.25)
    host = host_of(idle_rows[0].measurement)
    # what a host's capacity bound subtracts: one main and two workers, each at its own role's idle CPU
    assert fitted.model.idle_of(host, main=1, workers=2) == pytest.approx(cores + 2 * worker, rel=0.25)


def test_without_rest_windows_every_role_idles_alike():
    fitted = fit_capacity([m for m in load_embedded() if m.load.kind != "idle"])
    assert not any(n.startswith("idle_role:") for n in fitted.params)
    host = host_of(fitted.points[0].measurement)
    assert fitted.model.idle_cores_on(host, "worker") == fitted.model.idle_cores_on(host, "main") > 0


def test_the_rest_window_is_bounded():
    with pytest.raises(InputError, match="--rest-seconds"):
        build_plan((1.0,), 10.0, rest_s=601.0)
    assert build_plan((1.0,), 10.0, rest_s=30.0).rest_s == 30.0
