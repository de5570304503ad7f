"""Every read and write of a file goes through the one reader (`safety.files`) and the one writer
(`safety.write`): this test fails when a module opens, reads or writes a file another way (issue 24).

It scans the AST of every module outside `n8n_sizer/safety/` for `open()`, `Path.read_text/write_text/
read_bytes/write_bytes/touch`, `json.load/dump`, `os.open/fdopen` and `shutil.copy*/move`. Package data
(`importlib.resources.files(...)`) and the kernel's own `/proc` and `/sys` files are not user files. Every
other call must be in ALLOWED below, with the reason it is not a user path; a new one fails the test
until it goes through safety/ or is added here with its reason (in review).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "n8n_sizer"
ATTRS = {"read_text", "write_text", "read_bytes", "write_bytes", "touch"}

# (module, function, call): why this is not a user path, or why it is already guarded.
ALLOWED: dict[tuple[str, str, str], str] = {
    # exclusive creates: O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600 from the first byte, never an existing file
    ("bench/agent.py", "run_agent", "os.open"): "exclusive 0600 create of the agent's own results file",
    ("bench/agent.py", "run_agent", "os.fdopen"): "the fd of that exclusive create",
    ("cli/__init__.py", "_last_resort", "os.open"): "exclusive 0600 create in a fresh 0700 mkdtemp folder",
    ("cli/__init__.py", "_last_resort", "os.fdopen"): "the fd of that exclusive create",
    ("native/stack.py", "_prepare", "os.open"): "exclusive 0600 create of the stack's secrets",
    ("native/stack.py", "_prepare", "os.fdopen"): "the fd of that exclusive create",
    ("n8n/link.py", "_save_session", "os.open"): "exclusive 0600 create of the saved login",
    ("n8n/link.py", "_save_session", "os.fdopen"): "the fd of that exclusive create",
    ("n8n/link.py", "_save_session", "json.dump"): "into that exclusive 0600 file",
    ("stack/sampling.py", "local_stack_telemetry", "os.open"): "exclusive 0600 create of a probe secret",
    ("stack/sampling.py", "local_stack_telemetry", "os.fdopen"): "the fd of that exclusive create",
    # append-only records: O_APPEND|O_NOFOLLOW into a run folder the tool created exclusively
    ("runs/store.py", "_append", "os.open"): "O_APPEND|O_NOFOLLOW into the run's own folder",
    ("runs/store.py", "_append", "os.fdopen"): "the fd of that append",
    ("runs/store.py", "_drop_partial_line", "os.open"): "O_RDWR|O_NOFOLLOW on the run's own record file",
    ("runs/store.py", "create", "touch"): "touch(exist_ok=False) in a folder just made with mkdir()",
    ("telemetry/sampler.py", "append_samples", "os.open"): "O_APPEND|O_NOFOLLOW into the run's own folder",
    # the kernel's own files: /proc and the cgroup v1 mounts, never a path a user gave
    ("bench/calibrate.py", "runner_cpu_ms", "open"): "/proc/<pid>/cmdline and /proc/<pid>/stat of the runner",
    ("hosts/cgroups.py", "_write", "write_text"): "a cgroup control file under /sys/fs/cgroup of a group it made",
    ("hosts/cgroups.py", "add", "write_text"): "cgroup.procs of a group it made",
    ("hosts/cgroups.py", "usage_ns", "read_text"): "cpuacct.usage of a group it made",
    ("hosts/cgroups.py", "throttling", "read_text"): "cpu.stat of a group it made",
    ("hosts/cgroups.py", "pids", "read_text"): "cgroup.procs of a group it made",
    ("hosts/cgroups.py", "descendants", "read_text"): "/proc/<pid>/task/*/children",
    ("hosts/cgroups.py", "remove_tree", "read_text"): "cgroup.procs of a group it made, before removing it",
    ("hosts/cgroups.py", "remove_tree", "write_text"): "moving a leftover process to the parent group",
    # package data resolved through a variable (resources.files(...) on the line before)
    ("advisor/engine.py", "embedded_fit", "read_text"): "the package's data/fitted.json",
    # the tool's own logs, caches and working files, in folders it created (0700 or root's lab folder)
    ("remote/load_agent.py", "share", "read_bytes"): "the body file the bench itself put on the generator",
    ("hosts/host.py", "put", "shutil.copyfile"): "LocalHost's copy between paths the tool chose",
    ("hosts/host.py", "get", "shutil.copyfile"): "LocalHost's copy between paths the tool chose",
    ("lab/data.py", "start_data_services", "open"): "appends to pg_hba.conf of the cluster initdb just made",
    ("lab/sshd.py", "start_sshd", "open"): "sshd's log in the lab's own root-owned folder",
    ("lab/sshd.py", "wait_listening", "read_text"): "the tail of that log, for the error message",
    ("native/install.py", "_install_lock", "open"): "the install lock in the tool's cache",
    ("native/install.py", "_run_npm", "open"): "npm's log in the tool's cache",
    ("native/install.py", "_run_npm", "read_text"): "the tail of that log, for the error message",
    ("native/install.py", "_install_into_place", "write_text"): "a marker in a fresh temp folder of the cache",
    ("native/install.py", "fill", "write_text"): "package.json in a fresh temp folder of the cache",
    ("native/services.py", "spawn", "open"): "a service's log in the stack's own folder",
    ("native/services.py", "log_tail", "read_text"): "the tail of that log, for the error message",
    ("native/services.py", "_live_processes", "read_text"): "/proc/PID/stat through a glob variable",
    ("native/stack.py", "stop", "shutil.move"): "the stack's own logs into its kept folder",
    ("stack/handle.py", "lines", "open"): "a log file of a stack the tool started, from a recorded offset",
    # runs inside a lab namespace, on files the lab wrote itself (drills' agent)
    ("lab/host_agent.py", "start", "read_text"): "the drill agent's own snapshot and secrets in the lab folder",
    ("lab/host_agent.py", "_config_lines", "read_text"): "a Redis config the lab wrote",
    ("lab/host_agent.py", "ready", "read_text"): "the lab's Redis secrets file",
    ("lab/host_agent.py", "host_processes", "read_bytes"): "/proc/PID/cmdline through a scandir entry",
    ("lab/host_agent.py", "snapshot", "read_bytes"): "/proc/PID/cmdline and environ through a variable",
}


def _calls(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f, kind = node.func, None
        if isinstance(f, ast.Name) and f.id == "open":
            kind = "open"
        elif isinstance(f, ast.Attribute):
            base = ast.unparse(f.value)
            if f.attr in ATTRS:
                kind = f.attr
            elif base == "json" and f.attr in ("load", "dump"):
                kind = f"json.{f.attr}"
            elif base == "os" and f.attr in ("open", "fdopen"):
                kind = f"os.{f.attr}"
            elif base == "shutil" and f.attr in ("copyfile", "copy", "copy2", "move", "copytree"):
                kind = f"shutil.{f.attr}"
        if kind is None:
            continue
        text = ast.unparse(f)
        if "resources.files" in text or "/proc/" in text or "/sys/" in text:
            continue
        fn = node
        while fn in parents and not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            fn = parents[fn]
        yield (fn.name if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else "<module>"), kind, node.lineno


def found_calls() -> dict[tuple[str, str, str], int]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("safety/"):
            continue
        for function, kind, line in _calls(path):
            out[(rel, function, kind)] = line
    return out


def test_no_module_reads_or_writes_a_file_around_the_one_reader_and_writer() -> None:
    stray = {key: line for key, line in found_calls().items() if key not in ALLOWED}
    assert not stray, (
        "read or write these through n8n_sizer.safety (files.read_user_text / write.write_atomic), "
        "or add them to ALLOWED with the reason: "
        + "; ".join(f"n8n_sizer/{m}:{line} {fn}() {k}" for (m, fn, k), line in stray.items())
    )


def test_the_allow_list_has_no_stale_entry() -> None:
    """An entry whose call is gone must go too, or it would wave the next such call through unread."""
    stale = sorted(set(ALLOWED) - set(found_calls()))
    assert not stale, f"remove these from ALLOWED: {stale}"


def test_the_scan_sees_a_raw_read(tmp_path) -> None:
    """The scanner itself: a module with a plain read_text and open() is caught."""
    module = tmp_path / "m.py"
    module.write_text("from pathlib import Path\ndef f(p):\n    return Path(p).read_text() + open(p).read()\n")
    assert {(fn, kind) for fn, kind, _ in _calls(module)} == {("f", "read_text"), ("f", "open")}
