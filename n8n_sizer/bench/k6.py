"""Remote load: k6 from the pinned official image on the load-generator host, one k6 run per step.

The script (templates/k6/bench.js.j2) emits one `n8n_sizer_request` point per request with the ledger
fields in its metadata; `--out json` writes them on the load generator, a `grep` keeps those points and
k6's `dropped_iterations`, and the file comes back over SSH to become `RequestRecord`s.
"""

from __future__ import annotations

import json
import shlex
import tempfile
from datetime import datetime
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined

from n8n_sizer.hosts.host import Host
from n8n_sizer.bench.load import BODY_SNIPPET_BYTES
from n8n_sizer.fleet.locations import LOADGEN_READY_MARKER  # the load generator's cloud-init writes it
from n8n_sizer.runs.records import StepTally
from n8n_sizer.bench.plan import LoadPlan, RateStep
from n8n_sizer.bench.shapes import arrival_times, k6_stages
from n8n_sizer.runs.records import RequestRecord
from n8n_sizer.errors import InputError
from n8n_sizer.versions import K6_IMAGE

REQUEST_METRIC = "n8n_sizer_request"
# k6 starts this many VUs up front; more are started (up to the in-flight cap) when responses slow down.
PREALLOCATED_VUS_PER_RATE = 2


def render_script(step, url: str, body: bytes, plan: LoadPlan, target: str) -> str:
    env = Environment(loader=PackageLoader("n8n_sizer", "templates"), undefined=StrictUndefined,
                      keep_trailing_newline=True)
    rate = step.rate_per_s if isinstance(step, RateStep) else None
    shape = step.shape if isinstance(step, RateStep) else None
    start_rate, stages = k6_stages(shape, step.duration_s) if shape is not None else (None, None)
    return env.get_template("k6/bench.js.j2").render(
        shape=None if shape is None else shape.name,
        start_rate_milli=None if start_rate is None else round(start_rate * 1000),
        stages=None if stages is None else [{"duration": f"{d * 1000:.0f}ms", "target": round(r * 1000)}
                                            for d, r in stages],
        # each request's scheduled time, as the built-in driver computes it (k6 numbers iterations in order)
        due_ms=None if shape is None else [round(t * 1000, 3) for t in arrival_times(shape, step.duration_s)],
        step_name=step.name, target=target, url=url, body=body.decode("utf-8"), rate_per_s=rate,
        rate_milli=None if rate is None else round(rate * 1000),
        prealloc_vus=None if rate is None else min(plan.max_in_flight, max(1, int(rate * PREALLOCATED_VUS_PER_RATE))),
        max_in_flight=plan.max_in_flight, users=getattr(step, "users", None), duration_s=f"{step.duration_s:g}",
        timeout_s=int(plan.timeout_s), snippet_bytes=BODY_SNIPPET_BYTES)


def docker_command(workdir: str) -> str:
    d = shlex.quote(workdir)
    return (f"docker run --rm --network host -u 0 -v {d}:/work -w /work {K6_IMAGE} run --quiet "
            f"--no-usage-report --out json=/work/out.json /work/script.js > {d}/k6.log 2>&1; rc=$?; "
            f"grep -E '\"metric\":\"({REQUEST_METRIC}|dropped_iterations)\"' {d}/out.json > {d}/requests.json; "
            f"tail -c 2000 {d}/k6.log >&2; exit $rc")


def classify(status: int, error: str) -> str | None:
    """Error class of one k6 request (k6's status is 0 when no response arrived)."""
    text = error.lower()
    if status and 200 <= status < 300 and not error:
        return None
    if status:
        return "non-2xx"
    if "timeout" in text or "deadline exceeded" in text:
        return "timeout"
    if "refused" in text:
        return "refused"
    if "reset" in text or "eof" in text or "broken pipe" in text:
        return "reset"
    return "other"


def _unix_s(stamp: str) -> float:
    # k6 writes RFC 3339 with nanoseconds; Python parses up to microseconds.
    head, _, rest = stamp.partition(".")
    if rest:
        digits = "".join(c for c in rest if c.isdigit())
        zone = rest[len(digits):]
        stamp = f"{head}.{digits[:6]}{zone}"
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def parse_k6_points(text: str, step: str, target: str, seq_start: int) -> list[RequestRecord]:
    """Request records from k6 `--out json` lines (request points and dropped iterations)."""
    records: list[RequestRecord] = []
    dropped_times: list[float] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            point = json.loads(line)
            data, metric = point["data"], point["metric"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise InputError(f"k6 output line {number} is not a k6 JSON point: {line[:120]!r}") from None
        if point.get("type") != "Point":
            continue
        if metric == "dropped_iterations":
            dropped_times += [_unix_s(data["time"])] * int(data.get("value") or 1)
            continue
        if metric != REQUEST_METRIC:
            continue
        md = data.get("metadata") or {}
        try:
            seq, status = int(md["seq"]), int(md["status"])
            scheduled, sent, done = (float(md[k]) / 1000.0 for k in ("scheduled_ms", "sent_ms", "done_ms"))
        except (KeyError, ValueError):
            raise InputError(f"k6 output line {number} lacks the request metadata (seq, status, times); "
                             f"was it written by n8n-sizer's k6 script on k6 >= 0.41?") from None
        error = md.get("error", "")
        cls = classify(status, error)
        records.append(RequestRecord(
            seq=seq_start + seq, step=step, target=target, scheduled_s=scheduled, sent_s=sent,
            status=status or None, latency_ms=(done - scheduled) * 1000.0 if status else None, error_class=cls,
            error=None if cls is None else (error or f"HTTP {status}") + f" (k6 error_code {md.get('error_code', '0')})",
            body_snippet=md.get("body") or None))
    next_seq = max((r.seq for r in records), default=seq_start - 1) + 1
    for i, when in enumerate(sorted(dropped_times)):
        records.append(RequestRecord(seq=next_seq + i, step=step, target=target, scheduled_s=when, sent_s=when,
                                     status=None, latency_ms=None, error_class="dropped",
                                     error="not sent: k6 had no free VU (max in flight reached; dropped_iterations)"))
    return records


def run_k6_step(loadgen: Host, step, url: str, body: bytes, plan: LoadPlan, target: str, run_id: str,
                seq_start: int) -> tuple[list[RequestRecord], StepTally]:
    """Run one step with k6 on the load generator and bring its per-request records back."""
    workdir = f"/tmp/n8n-sizer-k6/{run_id}/{target}/{step.name}"
    loadgen.run(f"test -f {LOADGEN_READY_MARKER} || {{ echo 'load generator not ready: no "
                f"{LOADGEN_READY_MARKER} (cloud-init still running?)' >&2; exit 3; }}", timeout_s=30)
    with tempfile.TemporaryDirectory(prefix="n8n-sizer-k6-") as tmp:
        script = Path(tmp) / "script.js"
        script.write_text(render_script(step, url, body, plan, target))
        loadgen.put(script, f"{workdir}/script.js")
        res = loadgen.run(docker_command(workdir), timeout_s=step.duration_s + plan.timeout_s + 300, check=False)
        local = Path(tmp) / "requests.json"
        loadgen.get(f"{workdir}/requests.json", local)
        records = parse_k6_points(local.read_text(), step.name, target, seq_start)
    if res.exit_code != 0 and not records:
        from n8n_sizer.hosts.host import command_error

        raise command_error(loadgen.name, "k6 run (docker " + K6_IMAGE + ")", res.exit_code, res.stderr)
    records.sort(key=lambda r: r.seq)
    started = min((r.scheduled_s for r in records), default=0.0)
    finished = max((r.scheduled_s + (r.latency_ms or 0) / 1000.0 for r in records), default=started)
    sent = [r for r in records if r.error_class != "dropped"]
    outcome = StepTally(step=step.name, started_s=started, finished_s=finished, scheduled=len(records),
                          sent=len(sent), last_sent_s=max((r.sent_s for r in sent), default=None))
    return records, outcome
