"""Build an Advisor from measurements: the capacity fit, the RAM lines and, where enough worker counts were
measured on one host, a USL contention fit per (workflow, vCPU, arch).

The fit of the embedded measurements ships as `data/fitted.json`, keyed by the SHA-256 of
`data/measurements.json`, so `advise` answers without scipy; a stale or missing file means a refit.
`scripts/refit_embedded.py` rewrites it and a unit test checks it equals a fresh fit.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from importlib import resources

from n8n_sizer.advisor.fit import FittedModel, fit_capacity, fitted_from_dict
from n8n_sizer.advisor.measurements import Measurement, load_embedded
from n8n_sizer.advisor.ram import fit_ram
from n8n_sizer.advisor.recommend import Advisor
from n8n_sizer.advisor.usl import TooFewPointsForUsl, UslModel, fit_usl

# What a shipped fit was made from: the measurements, the priors, the lab topologies (their size bounds how far
# an answer extrapolates). A change to any of them makes the shipped fit stale, and `advise` refits.
FIT_INPUTS = ("data/measurements.json", "data/priors.json", "data/lab_shape.json")


def embedded_sha256() -> str:
    digest = hashlib.sha256()
    for name in FIT_INPUTS:
        digest.update(resources.files("n8n_sizer").joinpath(name).read_bytes())
    return digest.hexdigest()


def embedded_fit() -> FittedModel:
    """The shipped fit when it matches the shipped measurements, else a fresh fit."""
    rows = load_embedded()
    shipped = resources.files("n8n_sizer").joinpath("data/fitted.json")
    if shipped.is_file():
        data = json.loads(shipped.read_text(encoding="utf-8"))
        if data.get("measurements_sha256") == embedded_sha256():
            return fitted_from_dict(data, rows)
    return fit_capacity(rows)


def fit_contention(fitted: FittedModel) -> tuple[dict[tuple, UslModel], dict[tuple, str]]:
    """USL over queue-mode worker counts, per (workflow, vCPU, arch) host shape; a note for each refusal, keyed by
    the same shape (an answer prints only the notes about its own workflow and host)."""
    groups: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for p in fitted.points:
        m = p.measurement
        if m.setup.mode == "queue":
            groups[(m.workflow, float(m.hardware.vcpu), m.hardware.arch)].append((m.setup.workers, p.throughput_per_s))
    fits: dict[tuple, UslModel] = {}
    notes: dict[tuple, str] = {}
    for (workflow, vcpu, arch), pts in sorted(groups.items()):
        have = sorted({int(n) for n, _ in pts})
        missing = next(w for w in range(1, 64) if w not in have)
        how = (
            f"run `n8n-sizer bench --local --mode queue --workers {missing} --workflow {workflow} --rates 20,50` "
            f"on a {vcpu:g}-vCPU {arch} host, then `advise --results results/`"
        )
        try:
            fits[(workflow, vcpu, arch)] = fit_usl(pts, what=f"{workflow} on {vcpu:g} vCPU {arch}", how_to_get_more=how)
        except TooFewPointsForUsl as exc:
            notes[(workflow, vcpu, arch)] = str(exc)
    return fits, notes


def build_advisor(extra: list[Measurement] | None = None) -> Advisor:
    """The advisor on the embedded measurements, refitted with `extra` (the user's bench results) if given."""
    rows = load_embedded()
    if extra:
        rows = tuple(rows) + tuple(extra)
        fitted = fit_capacity(rows)
    else:
        fitted = embedded_fit()
    usl, notes = fit_contention(fitted)
    return Advisor(fitted, fit_ram(rows), usl, notes, rows)
