"""standins/http.py, a real server on 127.0.0.1: each path answers after its latency, unknown paths 404 at once,
bounded (503 when full, 413 for a large body), stoppable in-process and as a process by its PID; and safety/urls.py's
URL grammar."""

from __future__ import annotations

import concurrent.futures
import os
import time

import httpx
import pytest

from n8n_sizer.cli.history import instance_url
from n8n_sizer.errors import InputError
from n8n_sizer.standins.http import DelayedHttp, DelayedRoute, parse_routes, start_process, stop_process


def _timed(client: httpx.Client, method: str, url: str, **kw) -> tuple[httpx.Response, float]:
    started = time.perf_counter()
    answer = client.request(method, url, **kw)
    return answer, (time.perf_counter() - started) * 1000.0


def test_each_path_answers_after_its_own_latency():
    routes = {
        "/fast": DelayedRoute(latency_ms=0),
        "/slow": DelayedRoute(latency_ms=150, body={"n": 1}),
        "/err": DelayedRoute(status=502),
    }
    with DelayedHttp(routes) as server, httpx.Client(timeout=5) as client:
        client.get(server.url + "/fast")  # connection set up
        fast, fast_ms = _timed(client, "GET", server.url + "/fast")
        slow, slow_ms = _timed(client, "POST", server.url + "/slow?x=1", json={"a": 1})
        assert fast.json() == {"ok": True, "path": "/fast"} and fast_ms < 100
        assert slow.json() == {"n": 1} and 140 <= slow_ms < 600
        assert client.get(server.url + "/err").status_code == 502
        missing = client.get(server.url + "/nope")
        assert missing.status_code == 404 and missing.json()["path"] == "/nope"
        assert server.served == {"/fast": 2, "/slow": 1, "/err": 1}


def test_requests_wait_in_parallel_not_in_turn():
    with DelayedHttp({"/w": DelayedRoute(latency_ms=500)}) as server, httpx.Client(timeout=10) as client:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(lambda _: client.get(server.url + "/w").status_code, range(8)))
        assert codes == [200] * 8
        assert server.peak_in_flight >= 4 and server.in_flight == 0


def test_it_is_bounded_and_stops_at_once():
    with DelayedHttp({"/w": DelayedRoute(latency_ms=60_000)}, max_in_flight=1, max_body_bytes=100) as server:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            held = pool.submit(httpx.get, server.url + "/w", timeout=30)
            time.sleep(0.3)
            assert httpx.get(server.url + "/w", timeout=5).status_code == 503
            assert httpx.post(server.url + "/w", content=b"x" * 1000, timeout=5).status_code == 413
            started = time.perf_counter()
            server.stop()  # the held request answers now, not after its minute
            assert held.result(timeout=10).status_code == 200
            assert time.perf_counter() - started < 5
        assert server.refused == 1


def test_as_a_process_started_and_stopped_by_its_pid():
    pid, url = start_process({"/a": DelayedRoute(latency_ms=50)})
    try:
        assert httpx.get(url + "/a", timeout=5).json() == {"ok": True, "path": "/a"}
    finally:
        stop_process(pid)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/a", timeout=2)


def test_bad_routes_are_one_line():
    with pytest.raises(InputError, match="not JSON"):
        parse_routes("{")
    with pytest.raises(InputError, match="latency_ms"):
        parse_routes('{"/a": {"latency_ms": -1}}')
    with pytest.raises(InputError, match="starts with '/'"):
        DelayedHttp({"a": DelayedRoute()})


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("http://127.0.0.1:5678", "http://127.0.0.1:5678"),
        ("https://N8N.Example.com/", "https://N8N.Example.com"),
        ("https://n8n.example.com/sub/path/", "https://n8n.example.com/sub/path"),
        ("http://[::1]:5678", "http://[::1]:5678"),
    ],
)
def test_urls_accepted_and_normalised(text, want):
    assert instance_url(text, "--from-n8n") == want


@pytest.mark.parametrize(
    "text",
    [
        "",
        "127.0.0.1:5678",
        "file:///etc/passwd",
        "http://user@host",
        "http://host:0",
        "http://host:99999",
        "http://ho st",
        "http://host\n.evil",
        "http://host/#frag",
        "http://[zz]/",
        "http://-bad-.example",
        "http://" + "a" * 3000,
        "http://host:",
    ],
)
def test_urls_refused_in_one_line(text):
    with pytest.raises(InputError) as exc:
        instance_url(text, "--from-n8n")
    assert "\n" not in str(exc.value) and str(exc.value).startswith("--from-n8n")
