"""A table of hostile argument vectors through the real entry point (`n8n_sizer.cli.main`, in-process):
each ends with exit 2 (bad input) or 1 (a remote failure), exactly one line on stderr and no traceback;
nothing is started, destroyed or deleted on the way (no credentials point anywhere but nowhere)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = ROOT / "tests" / "data" / "hostile"
C = HOSTILE / "compose"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("hostile")
    fifo = base / "fifo"
    os.mkfifo(fifo)
    plain = base / "plain.txt"
    plain.write_text("just text\n")
    empty_dir = base / "empty-dir"
    empty_dir.mkdir()
    bad_env_dir = base / "bad-env"
    bad_env_dir.mkdir()
    (bad_env_dir / ".env").write_text("N8N_ENCRYPTION_KEY=\n")
    env_is_dir = base / "env-is-dir"
    (env_is_dir / ".env").mkdir(parents=True)
    shop = base / "shop"
    (shop / "stacks").mkdir(parents=True)
    (shop / "Pulumi.yaml").write_text("name: shop\n")
    (shop / "stacks" / "Pulumi.single.yaml").write_text((ROOT / "stacks" / "Pulumi.single.yaml").read_text())
    bomb_project = base / "bomb"
    (bomb_project / "stacks").mkdir(parents=True)
    (bomb_project / "Pulumi.yaml").write_text((C / "alias-bomb.yml").read_text())
    (bomb_project / "stacks" / "Pulumi.single.yaml").write_text("config: {}\n")
    stacks = base / "stacks"
    stacks.mkdir()
    for f in (HOSTILE / "stack").iterdir():
        (stacks / f.name).write_bytes(f.read_bytes())
    run = base / "run"
    run.mkdir()
    return {
        "fifo": str(fifo),
        "plain": str(plain),
        "dir": str(empty_dir),
        "bad_env_dir": str(bad_env_dir),
        "env_is_dir": str(env_is_dir),
        "shop": str(shop),
        "bomb_project": str(bomb_project),
        "stacks": str(stacks),
        "run": str(run),
        "missing": str(base / "missing"),
        "base": str(base),
    }


CASES: list[tuple[str, list[str], int]] = [
    # advise: non-finite and absurd numbers, contradicting flags, bad paths
    *[("advise", ["--rps", v], 2) for v in ("inf", "-inf", "nan", "1e308", "-1", "0", "abc")],
    *[
        ("advise", ["--rps", "40", flag, v], 2)
        for flag in ("--wait-ms", "--cpu-ms", "--p95-ms")
        for v in ("inf", "nan", "1e308", "-5")
    ],
    ("advise", ["--rps", "40", "--vcpu", "0"], 2),
    ("advise", ["--rps", "40", "--vcpu", "99999"], 2),
    ("advise", ["--rps", "40", "--p95-ms", "0"], 2),
    ("advise", ["--rps", "40", "--workload", "code-heavy", "--cpu-ms", "50"], 2),
    ("advise", ["--rps", "40", "--workload", "light", "--wait-ms", "50"], 2),
    ("advise", ["--rps", "40", "--workload", "nope"], 2),
    ("advise", ["--rps", "40", "--arch", "mips"], 2),
    ("advise", ["--rps", "40", "--results", "{missing}"], 2),
    ("advise", ["--rps", "40", "--results", "{plain}"], 2),
    ("advise", ["--rps", "40", "--results", "{fifo}"], 2),
    ("advise", ["--rps", "40", "--compose", ""], 2),
    ("advise", ["--rps", "40", "--compose", "{plain}"], 2),
    ("advise", ["--rps", "5", "--vcpu", "4", "--compose", "{bad_env_dir}"], 2),
    ("advise", ["--rps", "40", "--wait-ms", "3600001"], 2),
    ("advise", ["--validate", "--rps", "40"], 2),
    ("advise", ["--validate", "--compose", "{base}/v"], 2),
    ("advise", ["--validate", "--workload", "code-heavy"], 2),
    # render: ignored flags, Postgres' range, output folders, existing .env trouble
    ("render", ["--mode", "regular", "--db", "sqlite", "--pool", "5", "--out", "{base}/r1"], 2),
    ("render", ["--mode", "regular", "--concurrency", "1", "--out", "{base}/r2"], 2),
    ("render", ["--mode", "regular", "--out", ""], 2),
    ("render", ["--mode", "regular", "--out", " "], 2),
    ("render", ["--mode", "queue", "--max-connections", "99999999", "--out", "{base}/r3"], 2),
    ("render", ["--mode", "queue", "--max-connections", "262144", "--out", "{base}/r3"], 2),
    ("render", ["--mode", "queue", "--max-connections", "0", "--out", "{base}/r3"], 2),
    ("render", ["--mode", "queue", "--workers", "-1", "--out", "{base}/r4"], 2),
    ("render", ["--mode", "queue", "--workers", "65", "--out", "{base}/r4"], 2),
    ("render", ["--mode", "queue", "--pool", "inf", "--out", "{base}/r4"], 2),
    ("render", ["--mode", "regular", "--longest-execution-s", "0", "--out", "{base}/r4"], 2),
    ("render", ["--mode", "regular", "--longest-execution-s", "999999999", "--out", "{base}/r4"], 2),
    ("render", ["--mode", "regular", "--out", "{plain}"], 2),
    ("render", ["--mode", "regular", "--out", "{plain}/x"], 2),
    ("render", ["--mode", "regular", "--out", "{bad_env_dir}"], 2),
    ("render", ["--mode", "regular", "--out", "{env_is_dir}"], 2),
    ("render", ["--mode", "regular", "--n8n-version", "latest", "--out", "{base}/r5"], 2),
    ("render", ["--mode", "mixed", "--out", "{base}/r5"], 2),
    # a trailing newline must not slip through a `^...$` check into a YAML or an image tag
    ("render", ["--mode", "regular", "--n8n-version", "2.41.1\nimage: evil", "--out", "{base}/r6"], 2),
    ("render", ["--mode", "regular", "--public-url", "http://n8n.example.com/\n", "--out", "{base}/r6"], 2),
    (
        "render",
        ["--mode", "regular", "--profile", "production", "--domain", "n8n.example.com\n", "--out", "{base}/r6"],
        2,
    ),
    ("cost", ["--stack", "single\n"], 2),
    ("teardown", ["--stack", "single\n"], 2),
    ("reap", ["--owner", "me\n"], 2),
    # check: every kind of hostile compose file, and bad paths
    *[
        ("check", [str(p)], 2)
        for p in sorted(C.iterdir())
        if p.name
        not in {"max-connections-beyond.yml", "ports-huge-range.yml", "ports-broken-ipv6.yml", "pool-5000-digits.yml"}
    ],
    ("check", [str(C / "max-connections-beyond.yml")], 1),  # judged: the rule fails
    ("check", ["{dir}"], 2),
    ("check", ["{missing}"], 2),
    ("check", ["{fifo}"], 2),
    ("check", ["/dev/zero"], 2),
    ("check", [str(ROOT / "tests/golden/queue-1-worker/docker-compose.yml"), "--env", "{dir}"], 2),
    (
        "check",
        [str(ROOT / "tests/golden/queue-1-worker/docker-compose.yml"), "--env", str(HOSTILE / "env/binary.env")],
        2,
    ),
    ("check", [str(ROOT / "tests/golden/queue-1-worker/docker-compose.yml"), "--vcpu", "0"], 2),
    ("check", [str(ROOT / "tests/golden/queue-1-worker/docker-compose.yml"), "--vcpu", "inf"], 2),
    # cost: numbers and stack files
    *[("cost", ["--stack", "single", "--hours", v], 2) for v in ("inf", "nan", "1e308", "-1", "0")],
    ("cost", ["--stack", "single", "--warn-eur", "nan"], 2),
    ("cost", ["--stack", "BAD!"], 2),
    ("cost", ["--stack", "nosuch"], 2),
    ("cost", ["--stack", "single", "--stacks-dir", "{plain}"], 2),
    *[
        ("cost", ["--stack", name, "--stacks-dir", "{stacks}"], 2)
        for name in (
            "bomb",
            "list",
            "configlist",
            "binary",
            "targetstring",
            "infttl",
            "nanttl",
            "setupstring",
            "maxconn",
            "bigint",
        )
    ],
    # teardown and reap: another project, bad owners, bad providers
    ("teardown", ["--stack", "BAD!"], 2),
    ("teardown", ["--stack", "single", "--stacks-dir", "{shop}/stacks"], 2),
    ("teardown", ["--stack", "single", "--stacks-dir", "{bomb_project}/stacks"], 2),
    ("teardown", ["--stack", "nosuch"], 2),
    ("teardown", ["--stack", "single", "--stacks-dir", "{dir}"], 2),
    ("reap", ["--provider", "aws", "--owner", "me"], 2),
    ("reap", [], 2),
    ("reap", ["--owner", "Not Valid"], 2),
    ("reap", ["--owner", "me", "--all-owners"], 2),
    ("reap", ["--owner", "me"], 2),  # no credentials
    # bench: numbers, ignored flags, every file argument
    ("bench", ["--local", "--cpus", "0"], 2),
    ("bench", ["--local", "--cpus", "4096"], 2),
    *[
        ("bench", ["--local", flag, v], 2)
        for flag in ("--step-seconds", "--timeout", "--drain-seconds", "--p95-ms", "--tolerance", "--error-budget")
        for v in ("inf", "nan", "-1")
    ],
    ("bench", ["--local", "--error-budget", "2"], 2),
    ("bench", ["--local", "--warmup", "-1"], 2),
    *[("bench", ["--local", "--rest-seconds", v], 2) for v in ("-1", "601", "nan", "inf")],
    ("bench", ["--local", "--max-in-flight", "0"], 2),
    ("bench", ["--local", "--ssh-port", "0"], 2),
    *[("bench", ["--local", "--rates", v], 2) for v in ("inf", "nan", "1e308", "5,-1", "5,,x")],
    ("bench", ["--local", "--concurrency-sweep", "0"], 2),
    ("bench", ["--local", "--soak", "9" * 400, "--rate", "1"], 2),
    ("bench", ["--local", "--soak", "1h", "--rate", "inf"], 2),
    ("bench", ["--inventory", str(HOSTILE / "inventory/deep.json"), "--cpus", "2"], 2),
    *[("bench", ["--inventory", str(p)], 2) for p in sorted((HOSTILE / "inventory").iterdir())],
    ("bench", ["--inventory", "{dir}"], 2),
    ("bench", ["--inventory", "{fifo}"], 2),
    *[
        ("bench", ["--local", "--workflow", str(p), "--body", "{plain}"], 2)
        for p in sorted((HOSTILE / "workflow").iterdir())
    ],
    ("bench", ["--local", "--workflow", "{dir}"], 2),
    ("bench", ["--local", "--body", str(C / "binary.yml")], 2),
    ("bench", ["--local", "--body", "{dir}"], 2),
    ("bench", ["--local", "--body", "{plain}"], 2),
    ("bench", ["--local", "--out", ""], 2),
    ("bench", ["--local", "--out", "{plain}"], 2),
    ("bench", ["--local", "--ssh-key", "{dir}"], 2),
    ("bench", ["--local", "--ssh-key", "{plain}"], 2),
    ("bench", ["--local", "--p95-ms", "100"], 2),
    ("bench", ["--local", "--error-budget", "0.1"], 2),
    ("bench", ["--local", "--tolerance", "2"], 2),
    ("bench", ["--stack", "single", "--mode", "queue"], 2),
    ("bench", ["--stack", "single", "--db", "sqlite"], 2),
    # report: run folders and output
    ("report", ["{missing}"], 2),
    ("report", ["{plain}"], 2),
    ("report", ["{run}", "{run}"], 2),
    ("report", ["{run}", "--out", ""], 2),
    ("report", ["{run}", "--out", "{plain}"], 2),
    # drill
    ("drill", ["nope", "--local"], 2),
    ("drill", ["kill-worker", "--local", "--ssh-port", "0"], 2),
    ("drill", ["kill-worker", "--inventory", str(HOSTILE / "inventory/binary.json"), "--target", "t"], 2),
    ("drill", ["kill-worker", "--local", "--out", "{plain}"], 2),
    ("drill", ["kill-worker", "--local", "--persistence", "aof"], 2),
    ("drill", ["kill-worker", "--local", "--ssh-key", "{plain}"], 2),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command,args,code", CASES, ids=[f"{c} {' '.join(a)[:70]}" for c, a, _ in CASES])
def test_hostile_argv_is_one_clean_line(command, args, code, files, monkeypatch, capsys) -> None:
    from n8n_sizer.cli import main

    for var in (
        "HCLOUD_TOKEN",
        "GOOGLE_OAUTH_ACCESS_TOKEN",
        "N8N_SIZER_HCLOUD_URL",
        "N8N_SIZER_GCP_COMPUTE_URL",
        "N8N_SIZER_OWNER",
        "GOOGLE_PROJECT",
        "GOOGLE_CLOUD_PROJECT",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", files["dir"])  # no pulumi, no docker: nothing real can be reached
    monkeypatch.chdir(ROOT)
    argv = ["n8n-sizer", command, *(a.format(**files) for a in args)]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_:
        main()
    out, err = capsys.readouterr()
    assert "Traceback" not in err + out
    assert exit_.value.code == code, (argv, err)
    if code == 2 or command != "check":
        assert len(err.strip().splitlines()) == 1, err
        assert err.startswith("n8n-sizer: "), err
