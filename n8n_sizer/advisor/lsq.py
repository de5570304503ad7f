"""The fit's least-squares problem, evaluated once per distinct row and differentiated only where a parameter acts.

`fit.py` says what is fitted (the parameters, their priors, which rows); this module makes it fast enough to refit
once per held-out point (`advise --validate`), without changing what is computed:

- Many rows share their prediction: the per-role CPU rows of one setup at several rates differ only in the idle
  share (`idle x processes / rate`), so each distinct (workflow, setup, host, role) is evaluated once, each
  (host, role) idle figure once, and the rows are assembled from them with numpy.
- The Jacobian is by forward differences, as scipy's would be, but a parameter's column re-evaluates only the
  distinct rows that read it (the model's parameter reads are recorded while the residuals are evaluated): a host
  class's speed touches that class's rows, not the other 600.
- A leave-one-out refit starts at the full fit's optimum and takes Gauss-Newton steps with the full fit's Jacobian
  less the held-out rows (the chord method), then a step with a fresh Jacobian, repeated until the step is below
  the tolerance; it falls back to scipy's trust-region solver where that does not converge.
  `benchmarks/advise_bench.py --validate` compares these refits with scipy's from scratch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import numpy as np

from n8n_sizer.advisor.capacity import CapacityModel

STEP = 1.49e-8**0.5  # forward-difference step in log parameters (scipy's default for '2-point': sqrt(eps))
PRED_FLOOR = 1e-9
# A held-out refit has settled when steps with a fresh Jacobian lower the cost by less than this share of it: the
# objective is stationary to 1e-7 (what moves then are parameters the data leave flat, by a fraction of a percent).
SETTLED = 1e-7


class _Reads(dict):
    """A parameter dict that records which keys were read (`[]` or `.get`)."""

    def __init__(self, base: dict[str, float]):
        super().__init__(base)
        self.read: set[str] = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)


@dataclass(frozen=True)
class Block:
    """One kind of row: `keys` are its distinct predictions, `evaluate(model, key)` makes one, `assemble(values)`
    turns the distinct values into the block's residuals (already in noise units, one per row)."""

    keys: list[Hashable]
    evaluate: Callable[[CapacityModel, Hashable], float | None]
    assemble: Callable[[list], np.ndarray]


class LsqProblem:
    """Residuals r(z) = [blocks..., (z - prior) / prior_sd] over log parameters z, with bounds."""

    def __init__(
        self,
        names: list[str],
        prior: np.ndarray,
        prior_sd: np.ndarray,
        lo: np.ndarray,
        hi: np.ndarray,
        blocks: list[Block],
        reference: str,
    ):
        self.names, self.prior, self.prior_sd, self.lo, self.hi = names, prior, prior_sd, lo, hi
        self.blocks, self.reference = blocks, reference
        self.n_data = None  # set on the first evaluation

    def model_for(self, z: np.ndarray) -> CapacityModel:
        return CapacityModel({n: float(math.exp(v)) for n, v in zip(self.names, z, strict=True)}, self.reference)

    def _values(self, z: np.ndarray, record: bool = False):
        """Every block's distinct values at z, and (with `record`) the parameter names each one read."""
        params = {n: float(math.exp(v)) for n, v in zip(self.names, z, strict=True)}
        values, reads = [], []
        for block in self.blocks:
            vals, rd = [], []
            for key in block.keys:
                if record:
                    model = CapacityModel(params, self.reference)
                    model.params = tracked = _Reads(params)  # the model copies its dict: track the copy it reads
                    vals.append(block.evaluate(model, key))
                    rd.append(tracked.read)
                else:
                    vals.append(block.evaluate(CapacityModel(params, self.reference), key))
            values.append(vals)
            reads.append(rd)
        return values, reads

    def _assemble(self, z: np.ndarray, values) -> np.ndarray:
        data = [block.assemble(vals) for block, vals in zip(self.blocks, values, strict=True)]
        out = np.concatenate([*data, (z - self.prior) / self.prior_sd])
        self.n_data = len(out) - len(z)
        return out

    def residuals(self, z: np.ndarray) -> np.ndarray:
        return self._assemble(z, self._values(z)[0])

    def jacobian(self, z: np.ndarray) -> np.ndarray:
        """Forward differences, re-evaluating for each parameter only the distinct rows that read it."""
        values, reads = self._values(z, record=True)
        base_parts = [block.assemble(vals) for block, vals in zip(self.blocks, values, strict=True)]
        base = np.concatenate([*base_parts, (z - self.prior) / self.prior_sd])
        jac = np.zeros((len(base), len(z)))
        index = {n: i for i, n in enumerate(self.names)}
        touched: list[list[tuple[int, int]]] = [[] for _ in z]  # param -> [(block, key index)]
        for b, rd in enumerate(reads):
            for k, names in enumerate(rd):
                for name in names:
                    i = index.get(name)
                    if i is not None:
                        touched[i].append((b, k))
        params = {n: float(math.exp(v)) for n, v in zip(self.names, z, strict=True)}
        data_base = base[: -len(z)]
        for i, name in enumerate(self.names):
            jac[-len(z) + i, i] = 1.0 / self.prior_sd[i]
            if not touched[i]:
                continue
            bumped = dict(params)
            bumped[name] = float(math.exp(z[i] + STEP))
            model = CapacityModel(bumped, self.reference)
            changed: dict[int, list] = {}
            for b, k in touched[i]:
                vals = changed.setdefault(b, list(values[b]))
                vals[k] = self.blocks[b].evaluate(model, self.blocks[b].keys[k])
            data = np.concatenate(
                [block.assemble(changed[b]) if b in changed else base_parts[b] for b, block in enumerate(self.blocks)]
            )
            jac[: len(data), i] = (data - data_base) / STEP
        return jac

    # --- solving -------------------------------------------------------------------------------------------
    def solve(self, z0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """scipy's trust-region reflective least squares from z0, with the sparse Jacobian: (z, jacobian at z)."""
        from scipy.optimize import least_squares

        z0 = np.clip(z0, self.lo + 1e-9, self.hi - 1e-9)
        result = least_squares(
            self.residuals,
            z0,
            jac=lambda z: self.jacobian(z),
            bounds=(self.lo, self.hi),
            method="trf",
            x_scale=1.0,
            xtol=1e-10,
            ftol=1e-10,
        )
        return result.x, self.jacobian(result.x)

    def refine(
        self, z0: np.ndarray, jac0: np.ndarray, keep: np.ndarray, tol: float = 1e-7
    ) -> tuple[np.ndarray, np.ndarray]:
        """The optimum with only the rows in `keep` (a boolean mask over the data rows), starting at z0 where jac0
        was taken (the full fit's optimum): chord steps with jac0's kept rows, then Newton steps with a fresh
        Jacobian until the step is below `tol`; scipy from there if that fails. Returns (z, jacobian at z)."""
        full_keep = np.concatenate([keep, np.ones(len(z0), dtype=bool)])

        def cost_at(z: np.ndarray) -> float:
            r = self.residuals(z)[full_keep]
            return float(r @ r)

        def chord(z: np.ndarray, jac: np.ndarray, steps: int) -> tuple[np.ndarray, bool]:
            j = jac[full_keep]
            normal = j.T @ j
            cost = None
            for _ in range(steps):
                r = self.residuals(z)[full_keep]
                c = float(r @ r)
                if cost is not None and c > cost * (1 + 1e-6):  # growing, not rounding: the chord diverges
                    return z, False
                cost = c
                step = np.linalg.solve(normal, -(j.T @ r))
                z_next = np.clip(z + step, self.lo, self.hi)
                if float(np.max(np.abs(z_next - z))) < tol:
                    return z_next, True
                z = z_next
            return z, False

        z, ok = chord(z0.copy(), jac0, 25)
        for _ in range(3):  # chord steps settle where jac0 says the gradient is 0: check it with a fresh Jacobian
            if not ok:
                break
            before = cost_at(z)
            jac = self.jacobian(z)
            z, ok = chord(z, jac, 25)
            if ok and before - cost_at(z) <= SETTLED * before:
                return z, jac
        from scipy.optimize import least_squares  # the chord did not settle: the trust region from where it got

        result = least_squares(
            lambda v: self.residuals(v)[full_keep],
            np.clip(z, self.lo + 1e-9, self.hi - 1e-9),
            jac=lambda v: self.jacobian(v)[full_keep],
            bounds=(self.lo, self.hi),
            method="trf",
            xtol=1e-10,
            ftol=1e-10,
        )
        return result.x, self.jacobian(result.x)
