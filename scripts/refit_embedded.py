"""Rewrite n8n_sizer/data/fitted.json from n8n_sizer/data/measurements.json.

Run after changing the measurements or the model: `.venv/bin/python scripts/refit_embedded.py`.
tests/unit/test_advisor_fit.py fails while the shipped fit differs from a fresh one.
"""

import json
from pathlib import Path

from n8n_sizer.advisor.engine import embedded_sha256
from n8n_sizer.advisor.fit import fit_capacity, fitted_to_dict
from n8n_sizer.advisor.measurements import load_embedded

out = Path(__file__).resolve().parent.parent / "n8n_sizer" / "data" / "fitted.json"
fitted = fit_capacity(load_embedded())
out.write_text(json.dumps(fitted_to_dict(fitted, embedded_sha256()), indent=1) + "\n", encoding="utf-8")
print(f"wrote {out}")
