"""Coverage of the per-node pricer over a folder of public n8n workflow exports, and `advise --workflow` over each.

Given a folder (searched recursively for *.json), every file that is an n8n export (an object with a `nodes` list
and a `connections` object; a few collections wrap it in `{"workflow": {...}}` or a one-element list) is priced
with the embedded table and, unless --no-advise, answered by `advise --rps R --workflow FILE` in this process (the
CLI's own entry, its exit code and its text). It prints:

- exports found, files that are not exports, nodes and node types;
- non-trigger nodes priced and unpriced (the share the table does not hold), the unpriced types by count;
- how each priced node was priced: by its own measured row, by its family's figure, inside its AI root's row
  (docs/workflow-price.md);
- AI workflows (any node of @n8n/n8n-nodes-langchain) and how many answers carry a model waiting time;
- workflows that no webhook starts (schedule, cron, interval, app or manual triggers), and how many answers say so;
- the exit codes of `advise --workflow` over all of them (0 answered, 2 refused, 70 a bug), with the first lines.

Run: PYTHONPATH=.:benchmarks .venv/bin/python benchmarks/workflow_corpus.py FOLDER [--rps 10] [--sample N]
[--no-advise] [--json OUT]. The corpus is not part of the repository: docs/workflow-price.md#the-corpus names the
collections and commits it was built from and how.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import sys
import time
from pathlib import Path

MAX_BYTES = 8 << 20
AI_PREFIX = "@n8n/n8n-nodes-langchain."


def load_export(path: Path) -> dict | None:
    """The n8n export in `path`, or None when the file is not one (too large, not JSON, another shape)."""
    try:
        if path.stat().st_size > MAX_BYTES:
            return None
        doc = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError, RecursionError):
        return None
    if isinstance(doc, list) and len(doc) == 1:
        doc = doc[0]
    if isinstance(doc, dict) and isinstance(doc.get("workflow"), dict) and "nodes" not in doc:
        doc = doc["workflow"]
    if isinstance(doc, dict) and isinstance(doc.get("nodes"), list) and isinstance(doc.get("connections"), dict):
        return doc
    return None


def exports_in(folder: Path, sample: int | None) -> tuple[list[tuple[Path, dict]], int]:
    """(the exports, how many .json files were not exports); with `sample`, every k-th export in path order."""
    found, other = [], 0
    for path in sorted(folder.rglob("*.json")):
        doc = load_export(path)
        if doc is None:
            other += 1
        else:
            found.append((path, doc))
    if sample and len(found) > sample:
        step = len(found) / sample
        found = [found[int(i * step)] for i in range(sample)]
    return found, other


def advise_once(command, path: Path, rps: float) -> tuple[int, str, str]:
    """`advise --rps R --workflow FILE` in this process: (exit code, stdout, stderr)."""
    from n8n_sizer.cli import _run

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            _run(command, "n8n-sizer", ["advise", "--rps", f"{rps:g}", "--workflow", str(path)])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def _is_ai(doc: dict) -> bool:
    return any(isinstance(n, dict) and str(n.get("type", "")).startswith(AI_PREFIX) for n in doc["nodes"])


def survey(exports: list[tuple[Path, dict]], rps: float, run_advise: bool, say) -> dict:
    from n8n_sizer.advisor.workflow_price import load_node_costs, price_workflow
    from n8n_sizer.errors import InputError

    table = load_node_costs()
    priced_by = collections.Counter()
    unpriced = collections.Counter()
    types = set()
    nodes = triggers = 0
    refused_price: list[str] = []
    ai, scheduled, schedule_only = [], [], []
    kinds = collections.Counter()
    by_family = collections.Counter()
    for path, doc in exports:
        try:
            price = price_workflow(doc, table)
        except InputError as exc:
            refused_price.append(f"{path.name}: {exc}"[:200])
            continue
        for line in price.lines:
            types.add(line.type)
            if line.priced_by == "none":
                continue
            nodes += 1
            if line.priced_by == "trigger":
                triggers += 1
            elif line.priced_by == "unknown":
                unpriced[line.type] += 1
            else:
                priced_by[line.priced_by] += 1
                by_family[line.family or "?"] += 1
        if _is_ai(doc):
            ai.append(path)
        kind = price.trigger.kind if price.trigger is not None else "none"
        kinds[kind] += 1
        if price.trigger is not None and not price.trigger.webhook_like:
            scheduled.append(path)
            if all(t.kind == "schedule" for t in price.triggers):
                schedule_only.append(path)
    priced = sum(priced_by.values())
    out = {
        "exports": len(exports),
        "nodes": nodes,
        "node_types": len(types),
        "triggers": triggers,
        "non_trigger": priced + sum(unpriced.values()),
        "priced": priced,
        "priced_by": dict(priced_by),
        "priced_by_family": dict(by_family.most_common()),
        "unpriced": sum(unpriced.values()),
        "unpriced_types": unpriced.most_common(),
        "price_refused": refused_price,
        "ai_workflows": len(ai),
        "not_webhook_started": len(scheduled),
        "schedule_only": len(schedule_only),
        "sized_trigger_kinds": dict(kinds.most_common()),
    }
    if not run_advise:
        return out
    import typer

    from n8n_sizer.cli import app

    command = typer.main.get_command(app)
    codes = collections.Counter()
    firsts: dict[int, list[str]] = collections.defaultdict(list)
    ai_with_wait = sched_said = only_said = 0
    ai_set, sched_set, only_set = set(ai), set(scheduled), set(schedule_only)
    started = time.monotonic()
    for i, (path, _) in enumerate(exports):
        code, text, err = advise_once(command, path, rps)
        codes[code] += 1
        if code != 0 and len(firsts[code]) < 12:
            firsts[code].append(f"{path.name}: {err.strip().splitlines()[0] if err.strip() else '?'}"[:220])
        if path in ai_set and code == 0 and "model call" in text:
            ai_with_wait += 1
        if path in sched_set and code == 0 and "not started by a webhook" in text:
            sched_said += 1
        if path in only_set and code == 0 and "scheduled" in text:
            only_said += 1
        if (i + 1) % 100 == 0:
            say(f"advise: {i + 1}/{len(exports)} ({time.monotonic() - started:.0f} s)")
    out.update(
        advise_exit_codes=dict(sorted(codes.items())),
        advise_first_lines={str(k): v for k, v in firsts.items()},
        ai_answers_with_model_wait=ai_with_wait,
        not_webhook_answers_saying_so=sched_said,
        schedule_only_answers_saying_scheduled=only_said,
    )
    return out


def report(s: dict) -> str:
    share = s["unpriced"] / s["non_trigger"] if s["non_trigger"] else 0.0
    lines = [
        f"exports: {s['exports']}; nodes {s['nodes']} ({s['triggers']} triggers), {s['node_types']} node types",
        f"non-trigger nodes: {s['non_trigger']}; priced {s['priced']} {s['priced_by']}; unpriced {s['unpriced']} "
        f"({share:.1%})",
        "priced nodes by family: " + ", ".join(f"{k} {v}" for k, v in s["priced_by_family"].items()),
        "unpriced types (most frequent first): "
        + ", ".join(f"{t} {n}" for t, n in s["unpriced_types"][:25])
        + (" ..." if len(s["unpriced_types"]) > 25 else ""),
        f"AI workflows: {s['ai_workflows']}; not started by a webhook: {s['not_webhook_started']} (schedule only: "
        f"{s['schedule_only']}); the trigger each is sized for: {s['sized_trigger_kinds']}",
    ]
    if s["price_refused"]:
        lines.append(f"refused by the pricer: {len(s['price_refused'])}: " + "; ".join(s["price_refused"][:5]))
    if "advise_exit_codes" in s:
        lines.append(f"advise --workflow exit codes: {s['advise_exit_codes']}")
        for code, first in s["advise_first_lines"].items():
            lines += [f"  exit {code}: {line}" for line in first]
        lines.append(
            f"AI answers carrying a model waiting time: {s['ai_answers_with_model_wait']} of {s['ai_workflows']}; "
            f"answers saying the workflow is not webhook-started: {s['not_webhook_answers_saying_so']} of "
            f"{s['not_webhook_started']}; schedule-only answers saying it is scheduled: "
            f"{s['schedule_only_answers_saying_scheduled']} of {s['schedule_only']}"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--rps", type=float, default=10.0)
    ap.add_argument("--sample", type=int, default=None, help="every k-th export, this many in all")
    ap.add_argument("--no-advise", action="store_true", help="price only; do not run advise over each")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures as JSON here")
    args = ap.parse_args()
    if not args.folder.is_dir():
        print(f"{args.folder}: not a folder of exports", file=sys.stderr)
        return 2

    def say(text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)

    exports, other = exports_in(args.folder, args.sample)
    say(f"{len(exports)} exports, {other} other .json files under {args.folder}")
    figures = survey(exports, args.rps, not args.no_advise, say)
    figures["not_exports"] = other
    print(report(figures))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
