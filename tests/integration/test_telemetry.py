"""The sampler for a few seconds against real local processes: a busy parent/child pair (an n8n process
and its task runner stand-ins), a real redis-server with Bull keys, the kernel's /proc."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from n8n_sizer.hosts.host import LocalHost
from n8n_sizer.runs.records import Sample
from n8n_sizer.telemetry.probes import Probe
from n8n_sizer.telemetry.probes.host import host_probes, parse_loadavg
from n8n_sizer.telemetry.probes.services import BULL_WAIT_KEY, redis_probes
from n8n_sizer.telemetry.sampler import EDITOR_METRIC, ERROR_METRIC, Sampler

pytestmark = pytest.mark.integration


def read_samples(path: Path) -> list[Sample]:
    return [Sample.model_validate_json(line) for line in path.read_text().splitlines()]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def redis_port(tmp_path: Path):
    port = _free_port()
    proc = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            ping = subprocess.run(["redis-cli", "-p", str(port), "PING"], capture_output=True, text=True)
            if ping.stdout.strip() == "PONG":
                break
            time.sleep(0.05)
        subprocess.run(
            ["redis-cli", "-p", str(port), "LPUSH", BULL_WAIT_KEY, "1", "2", "3"], check=True, capture_output=True
        )
        yield port, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def busy_tree():
    """A parent that spawns one child burning a core, like n8n main and its task runner."""
    proc = subprocess.Popen(["sh", "-c", "sh -c 'while :; do :; done' & wait"], start_new_session=True)
    try:
        yield proc.pid
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the group started here: the parent and its child
        proc.wait()


def test_sampler_writes_rates_queue_depth_errors_and_editor(tmp_path, redis_port, busy_tree):
    port, redis_pid = redis_port
    path = tmp_path / "samples.jsonl"
    editor_calls = []

    def editor() -> None:
        editor_calls.append(time.time())
        if len(editor_calls) == 2:
            raise RuntimeError("editor answered 503")  # a failing editor call must become an error sample
        time.sleep(0.05)

    probes = [*host_probes(), *redis_probes(port), Probe("broken", "cat /proc/no-such-file", parse_loadavg)]
    sampler = Sampler(
        LocalHost(),
        path,
        probes,
        processes={"main": busy_tree, "redis": redis_pid},
        labels={"run": "t"},
        interval_s=1.0,
        editor_check=editor,
        editor_every_s=1.0,
    )
    with sampler:
        time.sleep(4.2)
    samples = read_samples(path)
    metrics = Counter(s.metric for s in samples)
    assert sampler.ticks >= 3

    runner = [s for s in samples if s.metric == "process_cpu_cores" and s.labels["process"] == "main-runner"]
    # the child burns what the 2 shared cores give it (other tests run alongside); the parent only waits
    assert runner and max(s.value for s in runner) > 0.1
    parent = [s.value for s in samples if s.metric == "process_cpu_cores" and s.labels["process"] == "main"]
    assert parent and max(parent) < 0.05

    assert metrics["host_cpu_pct"] >= 8 * 2  # every state, from the second tick on
    iowait = [s for s in samples if s.metric == "host_cpu_pct" and s.labels["state"] == "iowait"]
    assert iowait and all(0 <= s.value <= 100 for s in iowait)
    waiting = [s.value for s in samples if s.metric == "bull_jobs" and s.labels["state"] == "waiting"]
    assert waiting and set(waiting) == {3.0}
    assert all(s.value > 0 for s in samples if s.metric == "redis_used_memory_mib")
    assert metrics["host_load_avg"] >= 9 and metrics["host_mem_available_mib"] >= 3

    errors = [s for s in samples if s.metric == ERROR_METRIC]
    broken = [s for s in errors if s.labels["probe"] == "broken"]
    assert len(broken) == sampler.ticks and "No such file" in broken[0].labels["error"]
    assert any(s.labels["probe"] == "editor" and "503" in s.labels["error"] for s in errors)
    assert {s.labels["probe"] for s in errors} == {"broken", "editor"}
    editor_ms = [s.value for s in samples if s.metric == EDITOR_METRIC]
    assert editor_ms and all(40 <= v < 1000 for v in editor_ms)
    assert all(
        s.labels["host"] == "local" and s.labels["run"] == "t" and s.labels["source"] == "telemetry" for s in samples
    )


def test_sampler_keeps_going_when_a_process_exits(tmp_path):
    proc = subprocess.Popen(["sleep", "30"])
    path = tmp_path / "samples.jsonl"
    batches: list[list[Sample]] = []
    sampler = Sampler(LocalHost(), batches.append, [], processes={"worker-1": proc.pid})
    try:
        sampler.tick()
        proc.kill()
        proc.wait()
        after = sampler.tick()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    errors = [s for s in after if s.metric == ERROR_METRIC]
    assert [s.labels["probe"] for s in errors] == ["process-worker-1", "children-worker-1"]
    # first tick: RSS only (a CPU rate needs two readings); second: the two errors, nothing dropped
    assert [[s.metric for s in b] for b in batches] == [["process_rss_mib"], [ERROR_METRIC, ERROR_METRIC]]
    assert not path.exists()  # a callable sink gets everything, no file is written behind its back


def test_sampler_on_the_real_queue_stack(queue_stack, tmp_path):
    """Real n8n (main + 1 worker), Postgres and Redis: every probe answers, the worker and its runner show
    CPU while webhooks run, Postgres holds n8n's pool connections, the editor call is timed."""
    import httpx

    from n8n_sizer.stack.sampling import local_stack_telemetry

    workflow_id, url = queue_stack.deploy("light")
    path = tmp_path / "samples.jsonl"
    with queue_stack.client(login=True) as editor:
        sampler = Sampler(
            LocalHost(),
            path,
            **local_stack_telemetry(queue_stack.stack),
            labels={"target": "local"},
            editor_check=lambda: editor.get_workflow_editor(workflow_id),
            editor_every_s=2.0,
        )
        with sampler, httpx.Client(timeout=60) as http:
            until = time.monotonic() + 6
            sent = 0
            while time.monotonic() < until:
                http.post(url, json={"number": sent}).raise_for_status()
                sent += 1
    samples = read_samples(path)
    errors = [s.labels for s in samples if s.metric == ERROR_METRIC]
    assert errors == [] and sent >= 5

    def values(metric, **labels):
        return [s.value for s in samples if s.metric == metric and all(s.labels.get(k) == v for k, v in labels.items())]

    assert (
        values("process_cpu_cores", process="worker-1") and max(values("process_cpu_cores", process="worker-1")) > 0.02
    )
    processes = {s.labels["process"] for s in samples if s.metric == "process_rss_mib"}
    assert {"main", "worker-1", "postgres", "redis"} <= processes
    assert 150 < max(values("process_rss_mib", process="main")) < 3000  # n8n main idles at ~730 MB (notes)
    assert max(values("postgres_connections", state="all")) >= 3  # seed 000: main's pool + 1, plus the worker's
    assert values("bull_jobs", state="waiting") and values("redis_used_memory_mib")
    assert len(values(EDITOR_METRIC)) >= 2 and all(0 < v < 10_000 for v in values(EDITOR_METRIC))


def test_sampler_runs_slow_probes_every_nth_tick(tmp_path):
    from dataclasses import replace

    batches: list[list[Sample]] = []
    load = Probe("loadavg", "cat /proc/loadavg", parse_loadavg)
    sampler = Sampler(
        LocalHost(), batches.append, [load, replace(load, name="loadavg-slow", every=3)], labels={"probe_set": "t"}
    )
    for _ in range(6):
        sampler.tick()
    per_tick = [sum(1 for s in b if s.metric == "host_load_avg") for b in batches]
    assert per_tick == [6, 3, 3, 6, 3, 3]  # 3 windows per probe; the slow one on ticks 0 and 3


def test_a_parser_bug_is_an_error_sample_not_a_dead_sampler(tmp_path):
    def buggy(text, time_s, labels):
        raise TypeError("parser bug")

    batches: list[list[Sample]] = []
    sampler = Sampler(
        LocalHost(),
        batches.append,
        [Probe("buggy", "cat /proc/loadavg", buggy), Probe("loadavg", "cat /proc/loadavg", parse_loadavg)],
    )
    with sampler:
        time.sleep(1.5)
    assert sampler.ticks >= 2
    first = batches[0]
    assert [s.labels["error"] for s in first if s.metric == ERROR_METRIC] == ["TypeError: parser bug"]
    assert any(s.metric == "host_load_avg" for s in first)
