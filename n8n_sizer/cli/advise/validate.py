"""`advise --validate`: the model's leave-one-out accuracy over its measurements, one line per held-out item as it
is computed (to stderr with --json, whose stdout is the one JSON object), then the summaries."""

from __future__ import annotations

import json
import sys


def print_validation(extra, json_out: bool, quick: bool = False) -> int:
    from n8n_sizer.advisor.measurements import load_embedded
    from n8n_sizer.advisor.validate import closing_lines, validate_model, validation_json

    stream = sys.stderr if json_out else sys.stdout

    def say(line: str) -> None:
        print(line, file=stream, flush=True)

    v = validate_model(tuple(load_embedded()) + tuple(extra or ()), quick=quick, on_line=say)
    if json_out:
        print(json.dumps(validation_json(v), indent=2))
    else:
        print("\n".join(closing_lines(v)), flush=True)
    return 0
