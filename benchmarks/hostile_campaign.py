"""The whole hostile-input campaign of issue 40, with counts: every case of tests/unit/hostile_cases.py through the
real entry point, in-process. The unit harness (tests/unit/test_fuzz_harness.py) runs a fast sample of the same
cases; this runs all of them and prints, per kind, how many ran, how many were refused (exit 2), answered (0),
and how many were NOT clean (a crash, a traceback, more than one line, nonsense in a written report, a write
outside --out). The last line is the total; any unclean case is listed.

    .venv/bin/python benchmarks/hostile_campaign.py [KIND ...]

KIND: run-json, requests, samples, schedule, load-summary, ledger, compose, urls, folders (default: all).
A report whose run passes is written without host facts (else it would refit the advisor, seconds each); the
reading half of `advise --results` (runs.fit_input) runs on every run-json case with the facts, and the whole
`advise --results` on every ADVISE_EVERY-th (default 0: never). SHOW_ACCEPTED=1 lists the cases answered.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.unit import hostile_cases as hc  # noqa: E402

# the whole `advise --results` (which refits the advisor: seconds each) on every Nth run-json case; 0: never
ADVISE_EVERY = int(os.environ.get("ADVISE_EVERY", "0"))
SHOW_ACCEPTED = os.environ.get("SHOW_ACCEPTED") == "1"  # list the cases that were answered (exit 0), to read them


def _tree(folder: Path, skip: Path) -> dict[str, int]:
    found = {}
    for dirpath, _dirs, files in os.walk(folder):
        if Path(dirpath).resolve().is_relative_to(skip.resolve()):
            continue
        for name in files:
            path = Path(dirpath) / name
            found[str(path)] = path.lstat().st_size
    return found


def _run_case(write: Callable[[Path], None], advise: bool, facts: bool = False) -> list[tuple[int, str | None]]:
    """One damaged run folder through `report` (and `advise --results`): [(exit code, why unclean or None)].
    Without `facts`, the host facts are left out first, so a report that passes does not refit the advisor."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        shutil.copytree(hc.BASE_RUN, run)
        if not facts:
            (run / "run.json").write_text(json.dumps(hc._without_facts(json.loads((run / "run.json").read_text()))))
        write(run)
        before = _tree(Path(tmp), Path(tmp) / "report")
        code, said, err = hc.run_cli("report", run, "--no-plots", "--out", Path(tmp) / "report")
        why = hc.clean(code, said, err)
        if why is None and code == 0:
            why = hc.report_nonsense((Path(tmp) / "report" / "report.md").read_text())
        if why is None and _tree(Path(tmp), Path(tmp) / "report") != before:
            why = "wrote outside --out"
        out.append((code, why))
        if advise:
            code, said, err = hc.run_cli("advise", "--rps", "5", "--results", run)
            out.append((code, hc.clean(code, said, err)))
    return out


def fit_input(write: Callable[[Path], None]) -> tuple[int, str | None]:
    """What `advise --results` reads, without its refit: `runs.fit_input.load_results` on the damaged run. A
    refusal is exit 2; anything but InputError is unclean; measurements it returns must be finite and bounded."""
    from n8n_sizer.errors import InputError
    from n8n_sizer.runs.fit_input import load_results

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        shutil.copytree(hc.BASE_RUN, run)
        write(run)
        try:
            rows = load_results(run)
        except InputError as exc:
            return 2, None if "\n" not in str(exc) else "a refusal of more than one line"
        except Exception as exc:  # noqa: BLE001 - the campaign counts it
            return 70, f"{type(exc).__name__}: {exc}"[:200]
        for m in rows:
            r = m.results
            if r.answered_per_min is not None and not 0 <= r.answered_per_min <= 6e6:
                return 0, f"answered_per_min {r.answered_per_min}"
            for q in (r.p50_ms, r.p95_ms, r.p99_ms):
                if q is not None and not 0 <= q <= 86_400_000:
                    return 0, f"a latency of {q} ms"
        return 0, None


def run_json() -> Iterator[tuple[str, list[tuple[int, str | None]]]]:
    with_facts = dict(hc.run_json_cases(facts=True))
    for i, (name, text) in enumerate(hc.run_json_cases(facts=False)):
        refits = name.startswith("hosts.local.facts")  # a report over facts that pass refits the advisor
        every = ADVISE_EVERY and i % ADVISE_EVERY == 0
        results = (
            [] if refits and not every else _run_case(lambda run, t=text: (run / "run.json").write_text(t), False, True)
        )
        results.append(fit_input(lambda run, t=with_facts[name]: (run / "run.json").write_text(t)))
        if every:  # the whole advise --results, refit included
            with tempfile.TemporaryDirectory() as tmp:
                run = Path(tmp) / "run"
                shutil.copytree(hc.BASE_RUN, run)
                (run / "run.json").write_text(with_facts[name])
                code, said, err = hc.run_cli("advise", "--rps", "5", "--results", run)
                results.append((code, hc.clean(code, said, err)))
        yield name, results


def _jsonl(file: str, cases) -> Iterator[tuple[str, list[tuple[int, str | None]]]]:
    for name, text in cases:
        yield name, _run_case(lambda run, t=text: (run / file).write_bytes(t.encode("utf-8", "surrogatepass")), False)


def folders() -> Iterator[tuple[str, list[tuple[int, str | None]]]]:
    """render --out into folders another user could change: each must be refused, nothing written there."""
    for name, make in hc.folder_cases():
        with tempfile.TemporaryDirectory() as tmp:
            base = Path(tmp)
            out, watched = make(base)
            before = _tree(watched, base / "nothing") if watched.exists() else {}
            code, said, err = hc.run_cli("render", "--mode", "regular", "--out", out)
            why = hc.clean(code, said, err) or (None if code == 2 else f"accepted (exit {code})")
            if watched.exists() and _tree(watched, base / "nothing") != before:
                why = "wrote into the refused folder"
            yield name, [(code, why)]


def compose() -> Iterator[tuple[str, list[tuple[int, str | None]]]]:
    for name, text, _ in hc.compose_cases():
        with tempfile.TemporaryDirectory() as tmp:
            file = Path(tmp) / "docker-compose.yml"
            file.write_text(text)
            code, said, err = hc.run_cli("check", file)
            yield name, [(code, hc.clean(code, said, err) or (None if code == 2 else f"judged it (exit {code})"))]
    for name, extra in hc.compose_sibling_cases():
        with tempfile.TemporaryDirectory() as tmp:
            file = Path(tmp) / "docker-compose.yml"
            shutil.copy(hc.GOLDEN_COMPOSE, file)
            for rel, text in extra.items():
                (Path(tmp) / rel).write_text(text)
            code, said, err = hc.run_cli("check", file)
            yield name, [(code, hc.clean(code, said, err) or (None if code == 2 else f"judged it (exit {code})"))]


def urls() -> Iterator[tuple[str, list[tuple[int, str | None]]]]:
    for url in hc.url_cases():
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "out"
            code, said, err = hc.run_cli("render", "--mode", "regular", "--out", out, "--public-url", url)
            why = hc.clean(code, said, err) or (None if code == 2 else f"accepted (exit {code})")
            if out.exists() and any(out.iterdir()):
                why = why or "wrote the stack"
            yield repr(url[:40]), [(code, why)]


KINDS: dict[str, Callable[[], Iterator]] = {
    "run-json": run_json,
    "requests": lambda: _jsonl("requests.jsonl", hc.jsonl_cases("requests.jsonl")),
    "samples": lambda: _jsonl("samples.jsonl", hc.jsonl_cases("samples.jsonl")),
    "schedule": lambda: _jsonl("requests.jsonl", hc.schedule_cases()),
    "load-summary": lambda: _jsonl("samples.jsonl", hc.load_summary_cases()),
    "ledger": lambda: (
        (name, _run_case(lambda run, v=value: _set_ledger(run, v), advise=False)) for name, value in hc.ledger_cases()
    ),
    "compose": compose,
    "urls": urls,
    "folders": folders,
}


def _set_ledger(run: Path, value) -> None:
    doc = json.loads((run / "run.json").read_text())
    doc["ledgers"]["local"] = value
    (run / "run.json").write_text(json.dumps(doc))


def main(kinds: list[str]) -> int:
    total, bad = Counter(), []
    for kind in kinds or list(KINDS):
        started, counts = time.monotonic(), Counter()
        for name, results in KINDS[kind]():
            for code, why in results:
                counts["cases"] += 1
                counts[f"exit {code}"] += 1
                if why is not None:
                    counts["unclean"] += 1
                    bad.append(f"{kind}: {name}: {why}")
                elif code == 0 and SHOW_ACCEPTED:
                    print(f"  accepted {kind}: {name}")
        total.update(counts)
        shown = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()) if k not in ("cases", "unclean"))
        print(
            f"{kind:13} {counts['cases']:5} cases  {shown}  unclean {counts['unclean']}  "
            f"({time.monotonic() - started:.1f} s)",
            flush=True,
        )
    print(f"{'total':13} {total['cases']:5} cases  unclean {total['unclean']}")
    for line in bad:
        print("UNCLEAN", line[:300])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
