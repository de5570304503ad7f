"""The history reader against a real HTTP server on 127.0.0.1 that speaks n8n's public API (tests/unit/
n8n_api_standin.py): what it reads and writes, and every hostile answer (garbage, wrong types, huge pages, endless
cursors, slow answers, a million executions, 429 storms, redirects elsewhere, TLS, refused connections) ends in one
line and a bounded run, through the real command line (`n8n-sizer history export`, `advise --from-n8n`)."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import random
import socket
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from n8n_api_standin import KEY, FakeN8n, execution, json_answer  # noqa: E402

NOW = time.time()  # the fake instance's "now": fixed when the module is collected, long before a late test runs
START = NOW - 600
SINCE = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW - 900))  # its last 15 minutes, whenever a test runs
UNTIL = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW))

NODES_A = [
    {"name": "Webhook", "type": "n8n-nodes-base.webhook", "typeVersion": 2, "parameters": {"path": "orders"}},
    {
        "name": "Look up ACME",
        "type": "n8n-nodes-base.httpRequest",
        "typeVersion": 4.2,
        "parameters": {"url": "https://crm.internal.example/api?token=SECRET-TOKEN", "x": "={{ $json.body.id }}"},
    },
]
NODES_B = [
    {
        "name": "Every 5 s",
        "type": "n8n-nodes-base.scheduleTrigger",
        "typeVersion": 1.2,
        "parameters": {"rule": {"interval": [{"field": "seconds", "secondsInterval": 5}]}},
    },
    {"name": "NoOp", "type": "n8n-nodes-base.noOp", "typeVersion": 1, "parameters": {}},
]
WORKFLOWS = [
    {"id": "wA", "name": "Orders for ACME", "active": True, "createdAt": "2020-01-01T00:00:00.000Z", "nodes": NODES_A},
    {"id": "wB", "name": "Sync", "active": True, "createdAt": "2020-01-01T00:00:00.000Z", "nodes": NODES_B},
]


def _instance() -> list[dict]:
    """10 minutes: wA at ~1/s (Poisson) calling something for 200 ms, wB every 5 s; newest first."""
    rnd = random.Random(3)
    rows = []
    t = START
    while t < NOW - 2:
        t += rnd.expovariate(1.0)
        rows.append(("wA", t, 0.21, {"Webhook": [(0, 1, "success")], "Look up ACME": [(0.002, 203, "success")]}))
    rows += [
        ("wB", START + 5 * i, 0.01, {"Every 5 s": [(0, 0, "success")], "NoOp": [(0.001, 0, "success")]})
        for i in range(1, 119)
    ]
    rows.sort(key=lambda r: r[1])
    items = []
    for i, (wid, started, took, runs) in enumerate(rows, 1):
        nodes = [{"name": n["name"], "type": n["type"]} for n in (NODES_A if wid == "wA" else NODES_B)]
        items.append(execution(i, wid, started, took, runs=runs, nodes=nodes))
    return items[::-1]


EXECUTIONS = _instance()


_COMMANDS: dict = {}


def _command(prog: str):
    if prog not in _COMMANDS:
        import typer

        from n8n_sizer.cli import _advise, app

        if prog == "advise":
            sub = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
            _advise.register(sub)
            _COMMANDS[prog] = typer.main.get_command(sub)
        else:
            _COMMANDS[prog] = typer.main.get_command(app)
    return _COMMANDS[prog]


def cli(args: list[str], prog: str = "n8n-sizer") -> tuple[int, str, str]:
    """The real entry point, in this process: (exit code, stdout, stderr)."""
    from n8n_sizer.cli import _run

    command = _command(prog)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            _run(command, prog, args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("N8N_API_KEY", KEY)


def export(url: str, out: Path, *extra: str) -> tuple[int, str, str]:
    window = ["--since", SINCE] + ([] if "--until" in extra else ["--until", UNTIL])
    return cli(["history", "export", url, "--out", str(out), *window, *extra])


# --- what it reads ---------------------------------------------------------------------------------------------


def test_export_reads_rates_and_node_times_and_keeps_no_payload(tmp_path, key):
    out = tmp_path / "h.json"
    with FakeN8n(WORKFLOWS, EXECUTIONS) as api:
        code, stdout, err = export(api.url, out)
    assert code == 0, err
    assert stdout.startswith(f"wrote {out}: 2 workflow(s)")
    text = out.read_text()
    for secret in ("SECRET-TOKEN", "crm.internal.example", "payload", "json.body"):
        assert secret not in text
    h = json.loads(text)
    a, b = h["workflows"]
    assert a["name"] == "Orders for ACME" and a["trigger"]["kind"] == "webhook"
    assert a["rates"]["per_s_mean"] == pytest.approx(1.0, rel=0.15)
    assert b["trigger"] == {
        "kind": "schedule",
        "node_type": "n8n-nodes-base.scheduleTrigger",
        "rule": "every 5 seconds",
    }
    assert b["rates"]["per_s_mean"] == pytest.approx(0.2, rel=0.05)
    call = next(t for t in a["node_timings"] if t["name"] == "Look up ACME")
    assert call["family"] == "call" and call["wait_ms"] == pytest.approx(203 - 1.86, abs=1)
    assert a["nodes"][1]["expressions"] == 1
    assert a["sampled"] == 20 and a["by_mode"] == {"webhook": a["rates"]["executions"]}
    assert api.keys_seen and set(api.keys_seen) == {KEY}


def test_advise_from_the_file_equals_advise_from_the_url_and_anonymised_too(tmp_path, key):
    until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW))
    window = ["--since", SINCE, "--until", until]
    with FakeN8n(WORKFLOWS, EXECUTIONS) as api:
        assert export(api.url, tmp_path / "h.json", "--until", until, "--anonymise")[0] == 0
        code, from_url, err = cli(["--from-n8n", api.url, *window, "--vcpu", "2", "--json"], prog="advise")
    assert code == 0, err
    code, from_file, err = cli(["--history", str(tmp_path / "h.json"), "--vcpu", "2", "--json"], prog="advise")
    assert code == 0, err
    a, b = json.loads(from_url), json.loads(from_file)
    for d in (a, b):
        d["mix"].pop("source"), d["mix"].pop("anonymised")
        for row in d["mix"]["rows"]:
            row.pop("name")
    assert a == b
    assert a["mix"]["workflows"] == 2 and a["request"]["workload"] == "mix"
    # the instance's busiest minute is the answer's burst, for 60 s, as a multiple of the mean
    assert a["burst"]["burst_s"] == 60 and a["burst"]["peak_multiple"] == pytest.approx(
        a["mix"]["burst_per_s"] / a["mix"]["rate_per_s"], rel=0.01
    )


def test_the_text_answer_opens_with_the_mix(tmp_path, key):
    with FakeN8n(WORKFLOWS, EXECUTIONS) as api:
        export(api.url, tmp_path / "h.json")
    code, out, err = cli(["--history", str(tmp_path / "h.json"), "--vcpu", "2", "--scale", "Sync=10"], prog="advise")
    assert code == 0, err
    head = out.splitlines()
    assert head[0].startswith("# the mix: 2 workflow(s)")
    assert "Orders for ACME" in out and "schedule (every 5 seconds)" in out
    assert any(line.startswith("# n8n-sizer advise") for line in head)


# --- refusals of the input: exit 2 ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://n8n.example.com", "http:// or https://"),
        ("https://user:pass@n8n.example.com", "credentials"),
        ("http://", "no host"),
        ("http://127.0.0.1:70000", "1-65535"),
        ("http://n8n.example.com/\x1b[2J", "control"),
        ("http://n8n.example.com/?x=1", "query"),
        ("n8n.example.com", "http:// or https://"),
    ],
)
def test_a_bad_url_is_one_line_exit_2(tmp_path, key, url, why):
    code, _, err = export(url, tmp_path / "h.json")
    assert code == 2 and why in one_line(err)


def test_the_key_comes_from_the_environment_or_a_private_file_only(tmp_path, monkeypatch):
    monkeypatch.delenv("N8N_API_KEY", raising=False)
    code, _, err = export("http://127.0.0.1:9", tmp_path / "h.json")
    assert code == 2 and "N8N_API_KEY" in one_line(err)
    open_file = tmp_path / "key"
    open_file.write_text(KEY + "\n")
    open_file.chmod(0o644)
    code, _, err = export("http://127.0.0.1:9", tmp_path / "h.json", "--api-key-file", str(open_file))
    line = one_line(err)
    assert code == 2 and "open to group or others" in line and KEY not in line
    open_file.chmod(0o600)
    open_file.write_text(KEY + "\nsecond line\n")
    code, _, err = export("http://127.0.0.1:9", tmp_path / "h.json", "--api-key-file", str(open_file))
    assert code == 2 and "lines" in one_line(err)
    code, _, err = cli(["history", "export", "http://127.0.0.1:9", "--out", "x", "--api-key", KEY])
    assert code == 2 and KEY not in err  # there is no such option: a key is never a command-line value


def test_advise_refuses_flags_a_history_replaces(tmp_path):
    code, _, err = cli(["--history", "h.json", "--rps", "5"], prog="advise")
    assert code == 2 and "--rps" in one_line(err)
    code, _, err = cli(["--rps", "5", "--scale", "2"], prog="advise")
    assert code == 2 and "--scale" in one_line(err)
    code, _, err = cli(["--history", str(tmp_path / "missing.json")], prog="advise")
    assert code == 2 and "no such file" in one_line(err)


def test_an_existing_out_file_is_never_overwritten(tmp_path, key):
    out = tmp_path / "h.json"
    out.write_text("mine")
    with FakeN8n(WORKFLOWS, EXECUTIONS) as api:
        code, _, err = export(api.url, out)
    assert code == 2 and "never overwritten" in one_line(err)
    assert out.read_text() == "mine"


# --- failures outside: exit 1, one line, bounded ----------------------------------------------------------------


def _hook_answer(answer):
    return lambda path, query, headers: answer


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_refused_connection(tmp_path, key):
    code, _, err = export(f"http://127.0.0.1:{_free_port()}", tmp_path / "h.json")
    assert code == 1 and "connection refused" in one_line(err)


def test_tls_to_a_plain_http_server(tmp_path, key):
    with FakeN8n(WORKFLOWS, EXECUTIONS) as api:
        code, _, err = export(api.url.replace("http://", "https://"), tmp_path / "h.json")
    assert code == 1 and "TLS" in one_line(err)


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (json_answer({"message": "Unauthorized"}, 401), "N8N_PUBLIC_API_DISABLED=true n8n 2.41.1 answers 401"),
        (json_answer({"message": "Forbidden"}, 403), "scopes"),
        (json_answer({"message": "not found"}, 404), "no n8n public API there"),
        ((200, {"Content-Type": "text/html"}, b"<!doctype html><html>editor</html>"), "an HTML page, not JSON"),
        ((200, {"Content-Type": "application/json"}, b"{not json"), "not JSON"),
        ((200, {"Content-Type": "application/json"}, b"[" * 100_000), "nests"),
        (json_answer([1, 2, 3]), "not n8n's list format"),
        (json_answer({"data": [1], "nextCursor": None}), "data[0] is int"),
        (json_answer({"data": [], "nextCursor": {"x": 1}}), "nextCursor"),
        (json_answer({"message": "teapot"}, 418), "HTTP 418"),
    ],
)
def test_hostile_answers_are_one_line(tmp_path, key, answer, words):
    with FakeN8n(hook=_hook_answer(answer)) as api:
        code, _, err = export(api.url, tmp_path / "h.json")
    assert code == 1 and words in one_line(err)
    assert not (tmp_path / "h.json").exists()


@pytest.mark.parametrize(
    ("item", "words"),
    [
        ({"id": True, "workflowId": "w", "startedAt": None}, "id is a string"),
        ({"id": "1", "workflowId": "w", "startedAt": 12}, "ISO 8601"),
        ({"id": "1", "workflowId": "w", "startedAt": "yesterday"}, "execution that is not n8n's shape"),
        ({"id": "1", "workflowId": None, "startedAt": None}, "execution that is not n8n's shape"),
    ],
)
def test_executions_of_the_wrong_types(tmp_path, key, item, words):
    def hook(path, query, headers):
        if path.endswith("/executions"):
            return json_answer({"data": [item], "nextCursor": None})
        return None

    with FakeN8n(WORKFLOWS, hook=hook) as api:
        code, _, err = export(api.url, tmp_path / "h.json")
    assert code == 1 and words in one_line(err)


def test_a_huge_page_stops_at_the_cap(tmp_path, key):
    big = b'{"data": [' + b'{"id": "1", "pad": "' + b"x" * (3 << 20) + b'"}], "nextCursor": null}'

    def hook(path, query, headers):  # streamed, no Content-Length: the cap is counted as it arrives
        return 200, {"Content-Type": "application/json", "X-No-Length": "1", "Connection": "close"}, big

    with FakeN8n(hook=hook) as api:
        started = time.monotonic()
        code, _, err = export(api.url, tmp_path / "h.json", "--max-page-mb", "1")
    assert code == 1 and "page cap" in one_line(err)
    assert time.monotonic() - started < 10


def test_an_endless_cursor_that_repeats_itself_is_caught(tmp_path, key):
    page = json_answer({"data": [EXECUTIONS[0]], "nextCursor": "c2FtZQ=="})

    def hook(path, query, headers):
        return page if path.endswith("/executions") else None

    with FakeN8n(WORKFLOWS, hook=hook) as api:
        code, _, err = export(api.url, tmp_path / "h.json")
    assert code == 1 and ("same page cursor twice" in one_line(err) or "repeats itself" in one_line(err))


def test_an_endless_cursor_of_the_same_executions_is_caught(tmp_path, key):
    n = [0]

    def hook(path, query, headers):
        if not path.endswith("/executions"):
            return None
        n[0] += 1
        cursor = base64.b64encode(json.dumps({"lastId": n[0]}).encode()).decode()
        return json_answer({"data": EXECUTIONS[:3], "nextCursor": cursor})

    with FakeN8n(WORKFLOWS, hook=hook) as api:
        code, _, err = export(api.url, tmp_path / "h.json")
    assert code == 1 and "paging repeats itself" in one_line(err)


def test_a_million_executions_are_read_up_to_the_page_cap(tmp_path, key):
    """10^6 executions at 2/s: the read stops at --max-pages, and what it read is a consistent newer window."""
    total = 1_000_000
    newest = NOW - 1

    def hook(path, query, headers):
        if not path.endswith("/executions"):
            return None
        if query.get("includeData") == "true" or query.get("startedBefore") and "startedAfter" not in query:
            return json_answer({"data": [], "nextCursor": None})
        last = json.loads(base64.b64decode(query["cursor"]))["lastId"] if "cursor" in query else total + 1
        ids = range(last - 1, max(last - 251, 0), -1)
        data = [execution(i, "wA", newest - (total - i) / 2.0, 0.05) for i in ids]
        cursor = base64.b64encode(json.dumps({"lastId": ids[-1], "limit": 250}).encode()).decode()
        return json_answer({"data": data, "nextCursor": cursor})

    out = tmp_path / "h.json"
    with FakeN8n(WORKFLOWS, hook=hook) as api:
        started = time.monotonic()
        code, stdout, err = cli(
            ["history", "export", api.url, "--out", str(out), "--since", "30d", "--until", UNTIL, "--max-pages", "21"]
        )
    assert code == 0, err
    assert time.monotonic() - started < 60
    assert "stopped at the read's cap of 21 requests" in err
    h = json.loads(out.read_text())
    assert h["read"]["truncated"] and h["total"]["executions"] == 20 * 250
    assert h["workflows"][0]["rates"]["per_s_mean"] == pytest.approx(2.0, rel=0.01)  # the newer window, not 30 days


def test_slow_answers_are_bounded_by_the_timeout_and_the_wall_clock(tmp_path, key):
    def slow(path, query, headers):
        time.sleep(3)
        return None

    with FakeN8n(WORKFLOWS, EXECUTIONS, hook=slow) as api:
        started = time.monotonic()
        code, _, err = export(api.url, tmp_path / "h.json", "--timeout", "1", "--max-seconds", "2")
    assert code == 1 and "--max-seconds" in one_line(err)
    assert time.monotonic() - started < 12


def test_a_dripping_answer_is_stopped_by_the_wall_clock(tmp_path, key):
    import http.server
    import threading

    class Drip(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            try:
                for _ in range(200):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.2)
            except OSError:
                pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Drip)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        started = time.monotonic()
        code, _, err = export(f"http://127.0.0.1:{server.server_address[1]}", tmp_path / "h.json", "--max-seconds", "2")
    finally:
        server.shutdown()
        server.server_close()
    assert code == 1 and "still arriving" in one_line(err)
    assert time.monotonic() - started < 10


def test_a_429_storm_gives_up_after_the_retries(tmp_path, key):
    with FakeN8n(hook=_hook_answer((429, {"Retry-After": "0", "Content-Type": "application/json"}, b"{}"))) as api:
        code, _, err = export(api.url, tmp_path / "h.json")
        tries = len(api.requests)
    assert code == 1 and "HTTP 429 (too many requests) after 6 tries" in one_line(err)
    assert tries == 6


def test_a_long_retry_after_is_not_waited_past_the_deadline(tmp_path, key):
    with FakeN8n(hook=_hook_answer((503, {"Retry-After": "3600"}, b""))) as api:
        started = time.monotonic()
        code, _, err = export(api.url, tmp_path / "h.json", "--max-seconds", "5")
    assert code == 1 and "--max-seconds" in one_line(err)
    assert time.monotonic() - started < 5


def test_a_few_5xx_are_retried_and_the_read_succeeds(tmp_path, key):
    failures = [2]

    def flaky(path, query, headers):
        if failures[0] > 0:
            failures[0] -= 1
            return 503, {"Retry-After": "0"}, b"busy"
        return None

    with FakeN8n(WORKFLOWS, EXECUTIONS, hook=flaky) as api:
        code, _, err = export(api.url, tmp_path / "h.json")
    assert code == 0, err


def test_a_redirect_is_not_followed_and_the_key_goes_nowhere_else(tmp_path, key):
    with FakeN8n(WORKFLOWS, EXECUTIONS) as elsewhere:
        answer = (302, {"Location": f"{elsewhere.url}/api/v1/workflows"}, b"")
        with FakeN8n(hook=_hook_answer(answer)) as api:
            code, _, err = export(api.url, tmp_path / "h.json")
        assert elsewhere.requests == []
    line = one_line(err)
    assert code == 1 and "redirect" in line and KEY not in line


def test_an_instance_without_the_time_filter_is_filtered_here(tmp_path, key):
    """n8n versions before `startedAfter` refuse it with 400: the reader filters the pages itself."""

    def old(path, query, headers):
        if "startedAfter" in query or "startedBefore" in query:
            return json_answer({"message": "Unknown query parameter 'startedAfter'"}, 400)
        return None

    since, until = (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t)) for t in (NOW - 300, NOW))
    out = tmp_path / "h.json"
    with FakeN8n(WORKFLOWS, EXECUTIONS, hook=old) as api:
        code, _, err = cli(["history", "export", api.url, "--out", str(out), "--since", since, "--until", until])
    assert code == 0, err
    h = json.loads(out.read_text())
    bounds = _unix(since), _unix(until)
    assert h["total"]["executions"] == sum(1 for e in EXECUTIONS if bounds[0] <= _unix(e["startedAt"]) <= bounds[1])
    assert h["workflows"][0]["sampled"] > 0


def _unix(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_saved_without_data_and_successes_not_saved_are_said(tmp_path, key):
    failed = [
        {k: v for k, v in e.items() if k not in ("data", "workflowData")} | {"status": "error"} for e in EXECUTIONS
    ]
    with FakeN8n(WORKFLOWS, failed) as api:
        code, _, err = export(api.url, tmp_path / "h.json")
    assert code == 0, err
    h = json.loads((tmp_path / "h.json").read_text())
    assert any("EXECUTIONS_DATA_SAVE_ON_SUCCESS=none" in n for n in h["notes"])
    bare = [{k: v for k, v in e.items() if k not in ("data", "workflowData")} for e in EXECUTIONS]
    with FakeN8n(WORKFLOWS, bare) as api:
        code, _, err = export(api.url, tmp_path / "h2.json")
    h = json.loads((tmp_path / "h2.json").read_text())
    assert any("saved without run data" in n for n in h["workflows"][0]["notes"])
    assert h["workflows"][0]["node_timings"] == []


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["bench", "--history", "h.json"], "add --local"),
        (["bench", "--local", "--history", "h.json", "--find-max"], "--find-max"),
        (["bench", "--local", "--history", "h.json", "--workflow", "code-heavy"], "--workflow"),
        (["bench", "--local", "--scales", "2"], "--scales multiplies"),
        (["bench", "--local", "--history", "h.json", "--scales", "1,x"], "not a number"),
        (["bench", "--local", "--history", "h.json", "--scales", "0"], "--scales"),
    ],
)
def test_bench_history_refusals(tmp_path, args, words):
    code, _, err = cli(args)
    assert code == 2 and words in one_line(err)


def test_export_json_says_what_it_wrote(tmp_path, key):
    out = tmp_path / "h.json"
    with FakeN8n(WORKFLOWS, EXECUTIONS) as api:
        code, stdout, err = export(api.url, out, "--json", "--anonymise")
    assert code == 0, err
    said = json.loads(stdout)
    assert said["written"] == str(out) and said["workflows"] == 2 and said["anonymised"] is True
    assert said["executions"] == json.loads(out.read_text())["total"]["executions"] > 0
    assert "instance" not in said["read"] and api.url not in stdout
