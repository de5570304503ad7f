"""The embedded measurements load and hold the seeds' published values."""

from pathlib import Path

import pytest

from n8n_sizer.advisor.catalog import CATALOG, UnknownSize, find_size
from n8n_sizer.advisor.measurements import by_id, load_embedded

ROWS = by_id(load_embedded())


@pytest.mark.parametrize(
    "mid, answered, errors, p95_ms",
    [
        ("s000-regular-r20", 268, 1045, 90000),
        ("s000-regular-r50", 215, 3851, 100000),
        ("s000-regular-limit10-r20", 331, 1, 114000),
        ("s000-queue-1w-r20", 314, 51, 119000),
        ("s000-queue-2w-r50", 519, 0, 111000),
        ("s000-queue-4w-r50", 505, 1013, 93000),
        ("s000-queue-2w-c5-r5-r50", 426, 238, None),
    ],
)
def test_seed_000_main_and_concurrency_tables(mid, answered, errors, p95_ms):
    r = ROWS[mid].results
    assert (r.answered_per_min, r.errors, r.p95_ms) == (answered, errors, p95_ms)
    assert ROWS[mid].n8n_version == "2.40.7"
    assert ROWS[mid].source.startswith("seeds/000_")


@pytest.mark.parametrize(
    "size, vcpu, arch, eps",
    [
        ("cx23", 2, "x86", 15.04),
        ("cx33", 4, "x86", 31.93),
        ("cx43", 8, "x86", 36.14),
        ("cax11", 2, "arm", 13.9),
        ("cax21", 4, "arm", 25.77),
    ],
)
def test_seed_002_peaks(size, vcpu, arch, eps):
    m = ROWS[f"s002-{size}-peak"]
    assert m.results.executions_per_s == eps and m.results.errors == 0
    assert (m.hardware.size, m.hardware.vcpu, m.hardware.arch) == (size, vcpu, arch)
    assert m.workflow == "light" and m.n8n_version == "2.46.6"


def test_seed_000_set_figures_and_pool_formula_rows():
    assert ROWS["s000-queue-2w-idle"].results.idle_ram_mb == 919
    assert ROWS["s000-regular-set"].results.peak_ram_mb == 7100
    assert ROWS["s000-queue-4w-set"].results.editor_p95_ms == [1300, 8700]
    assert ROWS["s000-queue-4w-pool10-pgconn"].results.pg_connections_peak == 44
    assert ROWS["s000-code-node-cpu"].results.code_cpu_ms == 187


def test_seed_004_soak_ledger_and_buckets():
    soak = ROWS["s004-soak"].results
    assert (soak.fired, soak.accepted, soak.refused, soak.accepted_then_lost) == (2880, 2876, 4, 0)
    assert (soak.p50_ms, soak.p95_ms, soak.p99_ms) == (610, 1673, 5392)
    assert ROWS["s004-bucket-0630"].results.worst_ms == 56726
    assert ROWS["s004-soak"].hardware.shared_core


def test_every_row_has_provenance_and_no_zero_for_missing():
    repo = Path(__file__).resolve().parents[2]
    for m in load_embedded():
        # the seeds and notes under shared/, or this repo's own measurements, each run named on a docs page
        own = m.source.startswith("docs/findings/") and (repo / m.source).is_file() and m.load.note
        assert (m.source.split("/")[0] in ("seeds", "notes") or own) and m.table, m.id
        assert m.hardware.vcpu > 0
    # a figure the seed did not publish is absent, never 0
    assert ROWS["s000-regular-r5"].results.errors is None


def test_catalog_has_the_fleet_sizes_with_seed_prices():
    assert find_size("CX33").monthly_eur == 10.27 and find_size("cax21").arch == "arm"
    assert {s.size for s in CATALOG} >= {"cx23", "cx33", "cx43", "cax11", "cax21", "e2-micro", "e2-standard-8"}
    assert find_size("e2-micro").shared_core and find_size("e2-micro").baseline_vcpu == 0.25
    with pytest.raises(UnknownSize, match="known sizes"):
        find_size("cx99")
