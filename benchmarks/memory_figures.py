"""What n8n 2.41.1 holds in memory, measured on real n8n here: the figures `advisor/ram.py` embeds.

Each phase starts a fresh local stack (so one load's high-water mark is not the next one's baseline), warms it with
20 requests, records the idle RSS of each n8n process and its JS task runner (10 s of samples after 20 s at rest),
then loads it closed-loop with `hey -c N` at ascending N for --seconds each, sampling RSS (and V8's heap from
/metrics) every 0.5 s; a level's figure is the median and the max over its last two thirds. MiB per execution is
the least-squares slope over the levels answered without an error (an error means fewer were in flight).

- light: regular mode (Postgres, pool 20, no production limit), Webhook -> Code -> respond. Without a limit every
  open request is an execution in main, so N are in flight. Then Postgres: each backend's private memory (USS,
  smaps_rollup) for n8n's own pool and for 30 extra sessions that ran one query.
- wait: the same, Webhook -> Wait 20 s -> respond at the end: N executions asleep in main.
- legacy: light with N8N_EXPRESSION_ENGINE=legacy: what the default engine's per-execution isolates hold.
- code-heavy: the runner's RSS with 1, 5 and 20 Code tasks accepted at once (N8N_RUNNERS_MAX_CONCURRENCY 20).
- queue: 1 worker at --concurrency 500: idle main, worker and runner; the worker with N waiting executions; then
  Redis: the worker stopped, --jobs webhooks answered at once (Respond: Immediately) leave that many jobs waiting in
  Bull, and INFO memory's used_memory before and after gives bytes per waiting job; the worker started again works
  them off, and the finished jobs Bull keeps (N8N_EXECUTIONS_QUEUE_KEEP_LAST_COMPLETED) give bytes per kept job.
- engine: a private dockerd (and its containerd) at rest with no container: part of the OS's share of a host.

The speed probe (lab/speed.py) runs before and after. Take the lock: flock /work/heavy.lock .venv/bin/python
benchmarks/memory_figures.py [--seconds 40] [--jobs 1000] [--phases light,wait] > figures.json. No asserts: it
prints one JSON object (progress on stderr). Every process it starts is stopped by PID (LocalStack.stop; hey ends
with its -z duration).
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import re
import statistics
import subprocess
import threading
import time
from pathlib import Path

import httpx
from rich.console import Console

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.lab.speed import probe
from n8n_sizer.n8n.client import set_up_instance
from n8n_sizer.n8n.workflows import deploy_workflow, read_workflow, with_webhook_path
from n8n_sizer.native import services
from n8n_sizer.native.install import install_n8n
from n8n_sizer.native.redis import redis_command
from n8n_sizer.native.stack import LocalStack
from n8n_sizer.native.state import StackOptions

say = Console(stderr=True).print
MIB = 1 << 20


def _status_kib(pid: int, field: str) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def uss_mib(pid: int) -> float | None:
    """Private memory (Private_Clean + Private_Dirty) of one process, MiB."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    kib = sum(int(m.group(1)) for m in re.finditer(r"^Private_(?:Clean|Dirty):\s+(\d+) kB", text, re.M))
    return kib / 1024


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def n8n_family(stack: LocalStack, name: str) -> dict[str, float | None]:
    """RSS (MiB) of an n8n process and of its internal task runner child."""
    pid = stack.pid(name)
    runner = [p for p in services.family_pids(pid) if p != pid and "task-runner" in cmdline(p)]
    return {
        "n8n": _status_kib(pid, "VmRSS"),
        "runner": sum(_status_kib(p, "VmRSS") or 0 for p in runner) if runner else None,
    }


def heap_mib(url: str) -> dict[str, float]:
    """main's (or a worker's) /metrics: V8 heap used/total, external memory and RSS, MiB."""
    try:
        text = httpx.get(url, timeout=5).text
    except httpx.HTTPError:
        return {}
    out = {}
    for key in ("nodejs_heap_size_used_bytes", "nodejs_heap_size_total_bytes", "nodejs_external_memory_bytes"):
        m = re.search(rf"^\w*{key}\s+([0-9.e+]+)$", text, re.M)
        if m:
            out[key.removeprefix("nodejs_").removesuffix("_bytes")] = float(m.group(1)) / MIB
    return out


class Sampler:
    """Samples an n8n process family (and its /metrics) every 0.5 s in a thread."""

    def __init__(self, stack: LocalStack, name: str, metrics_url: str | None) -> None:
        self.stack, self.name, self.metrics_url = stack, name, metrics_url
        self.rows: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        start = time.monotonic()
        while not self._stop.is_set():
            row = {"t": time.monotonic() - start, **n8n_family(self.stack, self.name)}
            if self.metrics_url:
                row.update(heap_mib(self.metrics_url))
            self.rows.append(row)
            self._stop.wait(0.5)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def plateau(self, after_s: float) -> dict[str, float]:
        """Median and max of each figure over the samples taken after `after_s` (the in-flight plateau)."""
        rows = [r for r in self.rows if r["t"] >= after_s] or self.rows
        out = {}
        for key in ("n8n", "runner", "heap_size_used", "heap_size_total", "external_memory"):
            values = [r[key] for r in rows if r.get(key) is not None]
            if values:
                out[f"{key}_median"] = round(statistics.median(values), 1)
                out[f"{key}_max"] = round(max(values), 1)
        return out


def hey(url: str, concurrency: int, seconds: int, body: dict) -> dict[str, int]:
    """Closed-loop load: `concurrency` requests always open for `seconds`; the status codes hey counted."""
    res = subprocess.run(
        ["hey", "-z", f"{seconds}s", "-c", str(concurrency), "-t", "120", "-m", "POST", "-T", "application/json"]
        + ["-d", json.dumps(body), url],
        capture_output=True,
        text=True,
        timeout=seconds + 200,
    )
    codes = {k: int(v) for k, v in re.findall(r"\[(\d{3})\]\s+(\d+) responses", res.stdout)}
    errors = sum(int(n) for n in re.findall(r"^\s+\[(\d+)\]\s+(?:Post|Get)", res.stdout, re.M))
    return {**codes, **({"errors": errors} if errors else {})}


def slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares MB per unit of x."""
    if len({x for x, _ in points}) < 2:
        return None
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)


def covering_line(points: list[tuple[float, float]]) -> dict[str, float] | None:
    """The least-squares slope, with the intercept raised until the line is at or above every point: a limit drawn
    from it holds every level measured. `at_1` is the line at one execution in flight (the embedded base)."""
    s = slope(points)
    if s is None:
        return None
    intercept = max(y - s * x for x, y in points)
    return {"mib_per_execution": round(s, 2), "intercept": round(intercept, 1), "at_1": round(intercept + s, 1)}


def deploy(stack: LocalStack, session, definition: dict, path: str) -> str:
    with session.client() as client:
        _, hook = deploy_workflow(client, with_webhook_path(definition, path))
    return f"{stack.main_url}{hook}"


def waiting_workflow(respond: str) -> dict:
    """long-wait (Webhook -> Wait body.seconds) answering after the Wait (lastNode) or at once (onReceived)."""
    wf = copy.deepcopy(read_workflow("long-wait"))
    wf["nodes"][0]["parameters"]["responseMode"] = respond
    return wf


def settle(seconds: float) -> None:
    time.sleep(seconds)


def in_flight_levels(
    stack: LocalStack,
    name: str,
    metrics: str | None,
    url: str,
    levels: list[int],
    seconds: int,
    body: dict,
    key: str,
    rest_s: float,
) -> dict:
    """Closed-loop load at each level (ascending), sampling `name`; the plateau's median and max per level and the
    least-squares slope of each over the in-flight count (MiB per execution)."""
    rows = []
    for level in levels:
        with Sampler(stack, name, metrics) as s:
            codes = hey(url, level, seconds, body)
        plateau = s.plateau(after_s=seconds / 3)
        rows.append({"in_flight": level, "codes": codes, **plateau})
        say(
            f"  {name} {key} at {level} in flight: {plateau.get(f'{key}_median')} MiB (max {plateau.get(f'{key}_max')}) {codes}"
        )
        settle(rest_s)  # let the last requests finish before the next level
    clean = [r for r in rows if set(r["codes"]) == {"200"}]  # a level with errors had fewer in flight than asked
    out = {"levels": rows}
    for stat in ("median", "max"):
        out[f"{key}_mib_per_execution_{stat}"] = slope([(r["in_flight"], r[f"{key}_{stat}"]) for r in clean])
    out["covering_line_of_max"] = covering_line([(r["in_flight"], r[f"{key}_max"]) for r in clean])
    out["heap_mib_per_execution"] = slope(
        [(r["in_flight"], r["heap_size_used_median"]) for r in clean if "heap_size_used_median" in r]
    )
    return out


def idle_of(stack: LocalStack, name: str, metrics: str | None) -> dict:
    settle(20)
    with Sampler(stack, name, metrics) as s:
        settle(10)
    say(f"  {name} idle: {s.plateau(0)}")
    return s.plateau(0)


def regular_phase(install, seconds: int, workflow: str, levels: list[int], extra_env: dict | None = None) -> dict:
    """A fresh regular-mode stack per workflow, so one workflow's high-water mark is not the next one's baseline."""
    setup = Setup(mode="regular", db_pool_size=20, runner_concurrency=20)
    with LocalStack(setup, StackOptions(n8n_log_level="warn", extra_env=extra_env or {}), install=install) as stack:
        session = set_up_instance(stack.main_url)
        metrics = f"{stack.direct_main_url}/metrics"
        if workflow == "wait":
            url, body, rest = deploy(stack, session, waiting_workflow("lastNode"), "mem-wait"), {"seconds": 20}, 22
        else:
            url, body, rest = deploy(stack, session, read_workflow(workflow), f"mem-{workflow}"), {"number": 21}, 5
        for _ in range(20):  # warm the runner, the expression engine and the connections
            httpx.post(url, json={**body, "seconds": 1} if workflow == "wait" else body, timeout=60)
        out = {"idle": idle_of(stack, "main", metrics)}
        out["main"] = in_flight_levels(stack, "main", metrics, url, levels, seconds, body, "n8n", rest)
        if workflow == "code-heavy":
            out["runner"] = in_flight_levels(stack, "main", None, url, [1, 5, 20], seconds, body, "runner", rest)
        if workflow == "light":
            out["postgres"] = postgres_backends(stack)
    return out


def postgres_backends(stack: LocalStack, extra: int = 30) -> dict:
    """Private memory of n8n's pool backends and of `extra` idle sessions that ran one catalog query."""
    pg = stack.pid("postgres")
    before = {p for p in services.family_pids(pg) if "postgres: n8n n8n" in cmdline(p)}
    psql = str(services.postgres_bin_dir() / "psql")
    sessions = [
        subprocess.Popen(
            [psql, "-h", str(stack.postgres_socket_dir), "-p", str(stack.postgres_port), "-U", "n8n", "-d", "n8n"]
            + ["-qc", "select count(*) from execution_entity; select pg_sleep(20)"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(extra)
    ]
    try:
        settle(8)
        backends = {p for p in services.family_pids(pg) if "postgres: n8n n8n" in cmdline(p)}
        pool = [uss_mib(p) for p in before if p in backends]
        new = [uss_mib(p) for p in backends - before]
        aux = [uss_mib(p) for p in services.family_pids(pg) if p not in backends]
    finally:
        for proc in sessions:
            proc.wait(timeout=60)
    return {
        "pool_backend_uss_mib": [round(v, 2) for v in pool if v is not None],
        "idle_session_uss_mib_median": round(statistics.median([v for v in new if v is not None]), 2) if new else None,
        "sessions": len(new),
        "postmaster_and_aux_uss_mib": round(sum(v for v in aux if v is not None), 1),
    }


def redis_used(stack: LocalStack) -> int:
    info = redis_command(stack.redis_port, stack.secrets.redis_password, "INFO", "memory")
    return int(re.search(r"^used_memory:(\d+)", info, re.M).group(1))


def redis_count(stack: LocalStack, *args: str) -> int:
    return int(redis_command(stack.redis_port, stack.secrets.redis_password, *args))


def queue_phase(install, seconds: int, jobs: int, levels: list[int]) -> dict:
    out: dict = {}
    setup = Setup(mode="queue", workers=1, concurrency=500, db_pool_size=20)
    options = StackOptions(n8n_log_level="warn", extra_env={"N8N_METRICS": "true"})
    with LocalStack(setup, options, install=install) as stack:
        session = set_up_instance(stack.main_url)
        wait = deploy(stack, session, waiting_workflow("lastNode"), "mem-q-wait")
        at_once = deploy(stack, session, waiting_workflow("onReceived"), "mem-q-at-once")
        worker_metrics = f"http://127.0.0.1:{stack.ports['worker-1'].health}/metrics"
        for _ in range(20):
            httpx.post(wait, json={"seconds": 1}, timeout=60)
        out["idle_main"] = idle_of(stack, "main", None)
        out["idle_worker"] = idle_of(stack, "worker-1", worker_metrics)
        out["worker"] = in_flight_levels(
            stack, "worker-1", worker_metrics, wait, levels, seconds, {"seconds": 20}, "n8n", 22
        )
        if jobs:
            out["redis"] = redis_phase(stack, at_once, jobs)
    return out


def redis_phase(stack: LocalStack, at_once: str, jobs: int) -> dict:
    """Jobs left waiting in Bull with no worker to take them, then worked off and kept as finished."""
    stack.stop_worker(1)
    settle(3)
    empty = redis_used(stack)
    codes = subprocess.run(
        ["hey", "-n", str(jobs), "-c", "20", "-m", "POST", "-T", "application/json", "-d", '{"seconds": 1}', at_once],
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    settle(3)
    full = redis_used(stack)
    waiting = redis_count(stack, "LLEN", "bull:jobs:wait")
    out = {
        "used_memory_empty": empty,
        "used_memory_with_waiting": full,
        "waiting_jobs": waiting,
        "hey_codes": dict(re.findall(r"\[(\d{3})\]\s+(\d+) responses", codes)),
        "bytes_per_waiting_job": round((full - empty) / waiting) if waiting else None,
    }
    stack.start_worker(1)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and (
        redis_count(stack, "LLEN", "bull:jobs:wait") or redis_count(stack, "LLEN", "bull:jobs:active")
    ):
        settle(2)
    settle(5)
    drained = redis_used(stack)
    kept = redis_count(stack, "ZCARD", "bull:jobs:completed")
    out.update(
        {
            "used_memory_drained": drained,
            "kept_completed_jobs": kept,
            "bytes_per_kept_job": round((drained - empty) / kept) if kept else None,
        }
    )
    say(f"redis: {out}")
    return out


def engine_phase() -> dict:
    """The Docker engine's own idle memory (part of the OS's share of a host): a private dockerd (Debian's docker.io,
    its own data root, exec root and socket in a temp folder, no bridge, no iptables changes) and the containerd it
    starts, RSS after 20 s at rest with no container; stopped by PID."""
    import os
    import shutil
    import signal
    import tempfile

    run_dir = Path(tempfile.mkdtemp(prefix="nsm-", dir="/tmp"))
    argv = ["/usr/sbin/dockerd", "--data-root", str(run_dir / "data"), "--exec-root", str(run_dir / "x")]
    argv += ["--pidfile", str(run_dir / "dockerd.pid"), "-H", f"unix://{run_dir / 'docker.sock'}"]
    argv += ["--iptables=false", "--ip-forward=false", "--ip-masq=false", "--bridge=none"]
    with open(run_dir / "dockerd.log", "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (run_dir / "docker.sock").exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
        settle(20)
        family = services.family_pids(proc.pid)
        rss = {cmdline(p).split(" ")[0].rsplit("/", 1)[-1]: _status_kib(p, "VmRSS") for p in family}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        shutil.rmtree(run_dir, ignore_errors=True)
    say(f"engine: {rss}")
    return {"rss_mib": rss, "total_mib": round(sum(v or 0 for v in rss.values()), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=40, help="seconds per in-flight level")
    parser.add_argument("--jobs", type=int, default=1000, help="jobs left waiting in Bull (0: no Redis phase)")
    phases = ("light", "wait", "legacy", "code-heavy", "queue", "engine")
    parser.add_argument("--phases", default=",".join(phases), help=f"comma-separated, of {', '.join(phases)}")
    args = parser.parse_args()
    install = install_n8n()
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    figures: dict = {"date": started, "n8n": install.n8n_version, "node": install.node_version}
    figures["speed_before"] = probe(install.node_bin)
    for phase in args.phases.split(","):
        say(f"[bold]{phase}[/bold]")
        if phase == "light":
            figures[phase] = regular_phase(install, args.seconds, "light", [1, 25, 50, 100])
        elif phase == "wait":
            figures[phase] = regular_phase(install, args.seconds, "wait", [1, 50, 100, 150])
        elif phase == "legacy":  # the same light load without isolated-vm: what the expression engine's isolates hold
            figures[phase] = regular_phase(install, args.seconds, "light", [1, 50], {"N8N_EXPRESSION_ENGINE": "legacy"})
        elif phase == "code-heavy":
            figures[phase] = regular_phase(install, args.seconds, "code-heavy", [1])
        elif phase == "engine":
            figures[phase] = engine_phase()
        elif phase == "queue":
            figures[phase] = queue_phase(install, args.seconds, args.jobs, [1, 50, 100, 150])
        else:
            raise SystemExit(f"--phases: unknown phase {phase!r}; use {', '.join(phases)}")
    figures["speed_after"] = probe(install.node_bin)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
