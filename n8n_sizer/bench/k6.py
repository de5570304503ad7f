"""Remote load: k6 from the pinned official image on the load-generator host, one k6 run per step.

The script (templates/k6/bench.js.j2) emits one `n8n_sizer_request` point per request with the ledger
fields in its metadata; `--out json` writes them on the load generator, a `grep` keeps those points and
k6's `dropped_iterations`, and the file comes back over SSH to become `RequestRecord`s.

With payload flags (bench.payloads) the bodies, signature headers and classes are generated here, by the same
`Payloads.request` the built-in driver calls, one per planned request of the step, into payloads.json beside
the script (k6 reads it once into a SharedArray and picks by iteration number): the same bytes on both paths,
and the HMAC secret never leaves this machine. The file holds valid signatures, so it is 0600 in a 0700 folder
on the load generator and removed after the step.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import tempfile
from datetime import datetime
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined

from n8n_sizer.bench.http_post import BODY_SNIPPET_BYTES, EXECUTION_ID_MAX_BODY
from n8n_sizer.bench.payloads import CLASSES, Payloads, max_body_bytes, signature_headers
from n8n_sizer.bench.plan import LoadPlan, RateStep
from n8n_sizer.bench.shapes import arrival_times, constant, k6_stages
from n8n_sizer.errors import InputError
from n8n_sizer.fleet.locations import LOADGEN_READY_MARKER  # the load generator's cloud-init writes it
from n8n_sizer.hosts.host import Host, HostError
from n8n_sizer.runs.records import RequestRecord, StepTally
from n8n_sizer.runs.store import MAX_RECORDS_BYTES
from n8n_sizer.safety.files import read_user_text
from n8n_sizer.safety.write import write_atomic
from n8n_sizer.versions import K6_IMAGE

REQUEST_METRIC = "n8n_sizer_request"
# k6 starts this many VUs up front; more are started (up to the in-flight cap) when responses slow down.
PREALLOCATED_VUS_PER_RATE = 2
PAYLOADS_FILE = "payloads.json"  # beside script.js in the k6 container's /work
# k6 holds the pre-generated requests in memory once (SharedArray); beyond this a step is refused up front.
PAYLOADS_MAX_BYTES = 256 * 1024 * 1024
ENTRY_OVERHEAD_BYTES = 160  # JSON keys, quoting, the 71-byte signature header, the class


def planned_count(step) -> int:
    """Requests an open step schedules (k6 numbers its iterations 0..n-1 in that order); 1 for a closed step,
    which sends the fixed body, as the built-in driver's closed loop does."""
    if not isinstance(step, RateStep):
        return 1
    return len(arrival_times(step.shape or constant(step.rate_per_s), step.duration_s))


def payloads_estimate_bytes(step, payloads: Payloads) -> int:
    """An upper estimate of payloads.json for `step`: every body plus overhead, oversize ones at their size."""
    n = planned_count(step)
    oversize = int(n * payloads.malformed) // 4 + 1  # oversize is one class in four (bench.payloads.CLASSES)
    return n * (payloads.payload_bytes + ENTRY_OVERHEAD_BYTES) + oversize * (
        max_body_bytes(payloads.payload_bytes) + 1024
    )


def check_payloads_budget(steps, payloads: Payloads) -> None:
    """Refuse, before anything is sent, a step whose pre-generated requests would not fit k6's memory budget."""
    for step in steps:
        size = payloads_estimate_bytes(step, payloads)
        if size > PAYLOADS_MAX_BYTES:
            raise InputError(
                f"step {step.name}: {planned_count(step):,} requests of --payload-bytes "
                f"{payloads.payload_bytes} are about {size / 2**20:.0f} MiB for k6 to hold (limit "
                f"{PAYLOADS_MAX_BYTES // 2**20} MiB); shorten --step-seconds, lower the rate or "
                f"--payload-bytes, or bench a native-stack host with the built-in driver"
            )


def write_payloads(path: Path, step, body: bytes, payloads: Payloads) -> int:
    """payloads.json for `step` (0600): [{body, headers, class}] per planned request, from the same
    `Payloads.request` the built-in driver calls; a closed step gets the fixed body, signed when there is a
    secret. Returns the number of entries."""
    from n8n_sizer.safety.write import write_atomic

    check_payloads_budget([step], payloads)
    if isinstance(step, RateStep):
        entries = (payloads.request(i) for i in range(planned_count(step)))
    else:
        entries = iter([(body, signature_headers(payloads.secret, body), None)])
    parts, count = [], 0
    for raw, headers, cls in entries:
        # k6 sends a JS string as UTF-8; ASCII bodies (all bench.payloads makes) are then the same bytes
        parts.append(json.dumps({"body": raw.decode("ascii"), "headers": headers, "class": cls}, separators=(",", ":")))
        count += 1
    write_atomic(path, "[" + ",\n".join(parts) + "]\n", private=True, what="k6 payloads")
    return count


def render_script(step, url: str, body: bytes, plan: LoadPlan, target: str, payloads_file: str | None = None) -> str:
    env = Environment(
        loader=PackageLoader("n8n_sizer", "templates"), undefined=StrictUndefined, keep_trailing_newline=True
    )
    rate = step.rate_per_s if isinstance(step, RateStep) else None
    shape = step.shape if isinstance(step, RateStep) else None
    start_rate, stages = k6_stages(shape, step.duration_s) if shape is not None else (None, None)
    return env.get_template("k6/bench.js.j2").render(
        shape=None if shape is None else shape.name,
        start_rate_milli=None if start_rate is None else round(start_rate * 1000),
        stages=None
        if stages is None
        else [{"duration": f"{d * 1000:.0f}ms", "target": round(r * 1000)} for d, r in stages],
        # each request's scheduled time, as the built-in driver computes it (k6 numbers iterations in order)
        due_ms=None if shape is None else [round(t * 1000, 3) for t in arrival_times(shape, step.duration_s)],
        step_name=step.name,
        target=target,
        url=url,
        body=body.decode("utf-8"),
        rate_per_s=rate,
        rate_milli=None if rate is None else round(rate * 1000),
        prealloc_vus=None if rate is None else min(plan.max_in_flight, max(1, int(rate * PREALLOCATED_VUS_PER_RATE))),
        max_in_flight=plan.max_in_flight,
        users=getattr(step, "users", None),
        duration_s=f"{step.duration_s:g}",
        timeout_s=int(plan.timeout_s),
        snippet_bytes=BODY_SNIPPET_BYTES,
        payloads_file=payloads_file,
        execution_id_max_body=EXECUTION_ID_MAX_BODY,
    )


def docker_command(workdir: str) -> str:
    d = shlex.quote(workdir)
    return (
        f"docker run --rm --network host -u 0 -v {d}:/work -w /work {K6_IMAGE} run --quiet "
        f"--no-usage-report --out json=/work/out.json /work/script.js > {d}/k6.log 2>&1; rc=$?; "
        f'grep -E \'"metric":"({REQUEST_METRIC}|dropped_iterations)"\' {d}/out.json > {d}/requests.json; '
        f"tail -c 2000 {d}/k6.log >&2; exit $rc"
    )


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
        zone = rest[len(digits) :]
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
            raise InputError(
                f"k6 output line {number} lacks the request metadata (seq, status, times); "
                f"was it written by n8n-sizer's k6 script on k6 >= 0.41?"
            ) from None
        error = md.get("error", "")
        cls = classify(status, error)
        payload_class = md.get("payload_class") or None
        if payload_class is not None and payload_class not in CLASSES:
            raise InputError(
                f"k6 output line {number}: unknown payload class {payload_class!r}; expected one "
                f"of {', '.join(CLASSES)}"
            )
        # An iteration k6 started before its due time went out when it was sent: its latency runs from then (and
        # never below 0 on a wall clock stepped back), so the record stays in order: scheduled <= sent <= done.
        scheduled = min(scheduled, sent)
        records.append(
            RequestRecord(
                seq=seq_start + seq,
                step=step,
                target=target,
                scheduled_s=scheduled,
                sent_s=sent,
                status=status or None,
                latency_ms=max(0.0, done - scheduled) * 1000.0 if status else None,
                error_class=cls,
                error=None
                if cls is None
                else (error or f"HTTP {status}") + f" (k6 error_code {md.get('error_code', '0')})",
                body_snippet=md.get("body") or None,
                execution_id=md.get("execution_id") or None,
                payload_class=payload_class,
            )
        )
    next_seq = max((r.seq for r in records), default=seq_start - 1) + 1
    for i, when in enumerate(sorted(dropped_times)):
        records.append(
            RequestRecord(
                seq=next_seq + i,
                step=step,
                target=target,
                scheduled_s=when,
                sent_s=when,
                status=None,
                latency_ms=None,
                error_class="dropped",
                error="not sent: k6 had no free VU (max in flight reached; dropped_iterations)",
            )
        )
    return records


def stage_payloads(loadgen: Host, tmp: Path, workdir: str, step, body: bytes, payloads: Payloads) -> str:
    """Generate payloads.json here and copy it into `workdir` on the load generator, the folder made 0700 and
    the file 0600 (it holds valid signatures); returns the remote path. `unstage_payloads` removes it."""
    local = tmp / PAYLOADS_FILE
    write_payloads(local, step, body, payloads)
    remote = f"{workdir}/{PAYLOADS_FILE}"
    loadgen.run(f"umask 077 && mkdir -p {shlex.quote(workdir)} && chmod 700 {shlex.quote(workdir)}", timeout_s=30)
    loadgen.put(local, remote)
    loadgen.run(f"chmod 600 {shlex.quote(remote)}", timeout_s=30)
    return remote


def unstage_payloads(loadgen: Host, remote: str) -> None:
    loadgen.run(f"rm -f {shlex.quote(remote)}", timeout_s=30)


def run_k6_step(
    loadgen: Host,
    step,
    url: str,
    body: bytes,
    plan: LoadPlan,
    target: str,
    run_id: str,
    seq_start: int,
    payloads: Payloads | None = None,
) -> tuple[list[RequestRecord], StepTally]:
    """Run one step with k6 on the load generator and bring its per-request records back; with `payloads`,
    each request sends its own body, headers and class (see the module docstring)."""
    workdir = f"/tmp/n8n-sizer-k6/{run_id}/{target}/{step.name}"
    loadgen.run(
        f"test -f {LOADGEN_READY_MARKER} || {{ echo 'load generator not ready: no "
        f"{LOADGEN_READY_MARKER} (cloud-init still running?)' >&2; exit 3; }}",
        timeout_s=30,
    )
    with tempfile.TemporaryDirectory(prefix="n8n-sizer-k6-") as tmp:
        remote = None
        try:
            if payloads is not None:
                remote = stage_payloads(loadgen, Path(tmp), workdir, step, body, payloads)
            script = Path(tmp) / "script.js"
            write_atomic(
                script,
                render_script(
                    step, url, body, plan, target, payloads_file=None if remote is None else f"/work/{PAYLOADS_FILE}"
                ),
                private=True,
            )
            loadgen.put(script, f"{workdir}/script.js")
            res = loadgen.run(docker_command(workdir), timeout_s=step.duration_s + plan.timeout_s + 300, check=False)
        except BaseException:
            if remote is not None:  # try to remove the signed requests, but report the failure that stopped us
                with contextlib.suppress(HostError):
                    unstage_payloads(loadgen, remote)
            raise
        if remote is not None:
            unstage_payloads(loadgen, remote)
        local = Path(tmp) / "requests.json"
        loadgen.get(f"{workdir}/requests.json", local)
        records = parse_k6_points(
            read_user_text(local, "k6's results", max_bytes=MAX_RECORDS_BYTES, fix="run the step again"),
            step.name,
            target,
            seq_start,
        )
    if res.exit_code != 0 and not records:
        from n8n_sizer.hosts.host import command_error

        raise command_error(loadgen.name, "k6 run (docker " + K6_IMAGE + ")", res.exit_code, res.stderr)
    records.sort(key=lambda r: r.seq)
    started = min((r.scheduled_s for r in records), default=0.0)
    finished = max((r.scheduled_s + (r.latency_ms or 0) / 1000.0 for r in records), default=started)
    sent = [r for r in records if r.error_class != "dropped"]
    outcome = StepTally(
        step=step.name,
        started_s=started,
        finished_s=finished,
        scheduled=len(records),
        sent=len(sent),
        last_sent_s=max((r.sent_s for r in sent), default=None),
    )
    return records, outcome
