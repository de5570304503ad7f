"""The local stack's load balancer: Debian's Caddy in front of main and the `n8n webhook` processors.

The routing is the one `render --topology` writes for a cluster's ingest host (n8n's hosting table: production
webhook, waiting-webhook, form, waiting-form and MCP paths to the webhook processors, health-checked, and
everything else to main; /metrics closed); only the addresses change, to this stack's loopback ports. The
Caddyfile is rendered from a two-host topology of the same shape (ingest: main, N webhook processors, the
load balancer; data: Postgres, Redis, the workers) so the two can never drift apart.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from n8n_sizer.errors import InputError
from n8n_sizer.native import services
from n8n_sizer.native.services import RunningProcess

# Catalog sizes only give the render its arithmetic (Postgres memory per connection); nothing runs on them.
_RENDER_SIZE = "cx43"


def rendered_ingest_caddyfile(webhook_processors: int, workers: int) -> str:
    """The ingest host's Caddyfile of the cluster render for this many webhook processors and workers."""
    from n8n_sizer.bundle.render_topology import ingest_caddyfile
    from n8n_sizer.bundle.topology import parse_topology

    topology = parse_topology(
        {
            "topology": [
                {
                    "name": "ingest",
                    "provider": "hetzner",
                    "size": _RENDER_SIZE,
                    "roles": {"main": 1, "webhook": webhook_processors, "load_balancer": 1},
                },
                {
                    "name": "data",
                    "provider": "hetzner",
                    "size": _RENDER_SIZE,
                    "roles": {"postgres": 1, "redis": 1, "workers": max(1, workers)},
                },
            ]
        },
        "the local stack's topology",
    )
    return ingest_caddyfile(topology)


def local_caddyfile(port: int, main_port: int, webhook_ports: list[int], workers: int) -> str:
    """The Caddyfile for Caddy on 127.0.0.1:`port` in front of main and the webhook processors (loopback)."""
    from n8n_sizer.bundle.caddyfile import rebind_caddyfile

    rendered = rendered_ingest_caddyfile(len(webhook_ports), workers)
    # No admin API: the stack stops Caddy by PID, and a fixed admin port would clash between stacks.
    return rebind_caddyfile(
        rendered,
        site=f"http://127.0.0.1:{port}",
        bind="127.0.0.1",
        main=f"127.0.0.1:{main_port}",
        webhook=lambda k: f"127.0.0.1:{webhook_ports[k - 1]}",
        admin="off",
    )


def caddy_binary() -> str:
    found = shutil.which("caddy")
    if found is None:
        raise InputError("--webhook-processors needs Debian's caddy as the load balancer; apt-get install caddy")
    return found


def start_caddy(config: Path, folder: Path, port: int, log_path: Path, cpus: str | None = None) -> RunningProcess:
    """Caddy running `config` (its data and config folders inside `folder`), detached like every stack process."""
    folder.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(folder),
        "XDG_DATA_HOME": str(folder / "data"),
        "XDG_CONFIG_HOME": str(folder / "config"),
    }
    return services.spawn(
        "caddy",
        [caddy_binary(), "run", "--config", str(config), "--adapter", "caddyfile"],
        env,
        log_path,
        port,
        cwd=folder,
        cpus=cpus,
    )


class IngestProcesses:
    """What `LocalStack` adds for `StackOptions.webhook_processors` > 0 (queue mode): processes "webhook-1".."webhook-N"
    (`n8n webhook`, each on its own loopback port) and "caddy" on the stack's public port (`lb_port`). Main then
    runs with production webhooks off, as n8n's queue-mode docs say, and every process's WEBHOOK_URL is Caddy's: both
    from `bundle.n8n_env.role_env` (native_env.n8n_env), as the cluster's rendered files."""

    @property
    def webhook_names(self) -> list[str]:
        return [f"webhook-{i}" for i in range(1, self.options.webhook_processors + 1)]

    @property
    def uses_load_balancer(self) -> bool:
        return self.options.webhook_processors > 0

    def _spawn_caddy(self) -> RunningProcess:
        from n8n_sizer.safety.write import write_atomic

        folder = self.stack_dir / "caddy"
        folder.mkdir(exist_ok=True)
        text = local_caddyfile(
            self.lb_port,
            self.ports["main"].http,
            [self.ports[name].http for name in self.webhook_names],
            self.setup.workers,
        )
        write_atomic(folder / "Caddyfile", text, private=False)  # addresses and routes only, no secret
        return start_caddy(folder / "Caddyfile", folder, self.lb_port, self.log_path("caddy"), self.cpus)
