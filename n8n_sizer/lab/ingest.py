"""The ingest host's load balancer in the lab: Debian's Caddy running the Caddyfile `render --topology` wrote.

`lab_caddyfile` (pure) changes only addresses: the compose service names of the upstreams become the ingest
host's loopback ports where the lab runs main and the webhook processors, and the site listens on the host's
private address, port 5678, as the rendered bundle publishes it. The routing table, health checks and the
closed /metrics stay exactly as rendered. On the host:

    python -m n8n_sizer.remote.lab_ingest up --state DIR --config Caddyfile --listen 10.89.0.11
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from n8n_sizer.errors import InputError
from n8n_sizer.lab.n8n_role import MAIN_PORT, WEBHOOK_BASE_PORT
from n8n_sizer.safety.frozen import Frozen

READY_TIMEOUT_S = 60.0


class CaddyProcess(Frozen):
    pid: int
    url: str
    log: str


def lab_caddyfile(rendered: str, listen: str) -> str:
    """The rendered ingest Caddyfile with lab addresses: n8n-main -> 127.0.0.1:5678, n8n-webhook-N ->
    127.0.0.1:(5680+N), the site bound to `listen`:5678, and Caddy's admin API on the host's loopback."""
    from n8n_sizer.bundle.caddyfile import rebind_caddyfile

    return rebind_caddyfile(
        rendered,
        site=f"http://{listen}:{MAIN_PORT}",
        bind=listen,
        main=f"127.0.0.1:{MAIN_PORT}",
        webhook=lambda k: f"127.0.0.1:{WEBHOOK_BASE_PORT + k}",
        admin="127.0.0.1:2019",
    )


def start_caddy(state: Path, config: Path, listen: str) -> CaddyProcess:
    from n8n_sizer.native import services

    caddy = shutil.which("caddy")
    if caddy is None:
        raise InputError("Debian's caddy is not installed on the ingest host; apt-get install caddy")
    state.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(state),
        "XDG_DATA_HOME": str(state / "caddy-data"),
        "XDG_CONFIG_HOME": str(state / "caddy-config"),
    }
    log = state / "caddy.log"
    proc = services.spawn(
        "caddy", [caddy, "run", "--config", str(config), "--adapter", "caddyfile"], env, log, MAIN_PORT
    )
    url = f"http://{listen}:{MAIN_PORT}/healthz"
    services.wait_until(proc, lambda: services.http_ok(url), READY_TIMEOUT_S, f"routing {url} to main")
    return CaddyProcess(pid=proc.pid, url=url, log=str(log))


def deploy_caddy(host, python: str, *, state: str, config: str, listen: str) -> CaddyProcess:
    from n8n_sizer.remote.protocol import Program, run

    args = ["up", "--state", state, "--config", config, "--listen", listen]
    return run(host, Program.LAB_INGEST, args, CaddyProcess, python=python, timeout_s=READY_TIMEOUT_S + 30)
