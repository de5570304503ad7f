"""cloud-init user data that boots a rendered stack on a fresh Ubuntu 24.04 VM.

The fleet (issue 4) passes `render_bundle(...).cloud_init` as each VM's user_data; the bench driver
waits for `READY_MARKER` over SSH (or gives up early when `FAILED_MARKER` appears).
"""

from __future__ import annotations

import base64
import gzip

from jinja2 import Environment

from n8n_sizer.errors import InputError

STACK_DIR = "/opt/n8n"
MARKER_DIR = "/var/lib/n8n-sizer"
READY_MARKER = f"{MARKER_DIR}/ready"
FAILED_MARKER = f"{MARKER_DIR}/failed"
# Hetzner Cloud rejects user_data above 32 KiB (its API limit for `user_data`).
USER_DATA_LIMIT_BYTES = 32 * 1024
# Image pulls on a fresh VM plus n8n's first-start migrations (about 11 s locally, notes/real-n8n.md)
# fit well inside this; healthchecks retry for up to 300 s on main.
WAIT_TIMEOUT_S = 900
# Hetzner and GCP both serve user_data (and so the .env secrets) on this link-local address.
METADATA_IP = "169.254.169.254"
METADATA_BLOCK_SCRIPT = "/usr/local/sbin/n8n-sizer-metadata-block"
_RULE = f"DOCKER-USER -d {METADATA_IP}/32 -j REJECT --reject-with icmp-port-unreachable"
METADATA_BLOCK_CHECK = f"iptables -C {_RULE}"


DATA_PORTS = (5432, 6379)  # Postgres, Redis: published on the data host's private address


def data_port_rules(subnet: str | None, clients: list[str]) -> list[str]:
    """DOCKER-USER rules, top first: the data ports answer the n8n hosts (`clients`) and no other address of the
    private subnet (the load generator shares it; Hetzner's firewall does not filter the private network)."""
    if not subnet:
        return []
    rules = [f"DOCKER-USER -s {ip}/32 -p tcp --dport {port} -j RETURN" for port in DATA_PORTS for ip in clients]
    return rules + [
        f"DOCKER-USER -s {subnet} -p tcp --dport {port} -j REJECT --reject-with tcp-reset" for port in DATA_PORTS
    ]


def metadata_block_script(data_rules: list[str] | None = None) -> str:
    """Idempotent shell: make DOCKER-USER if Docker has not yet, and put the reject rule at its top once; on a
    data host also the `data_port_rules` above it, in their order.

    REJECT, not DROP: a container that asks gets an immediate error instead of hanging on a timeout."""
    lines = [
        "#!/bin/sh",
        "# Reject forwarded (container) traffic to the cloud metadata endpoint; see cloud-init.yaml.",
        "set -eu",
        "iptables -N DOCKER-USER 2>/dev/null || true",
        f"iptables -C {_RULE} 2>/dev/null || iptables -I {_RULE}",
    ]
    if data_rules:
        lines.append("# The data ports for the n8n hosts only (inserted bottom-up: each -I goes to the top).")
        lines += [f"iptables -C {rule} 2>/dev/null || iptables -I {rule}" for rule in reversed(data_rules)]
    return "\n".join(lines) + "\n"


def gzip_b64(text: str) -> str:
    """cloud-init's `encoding: gz+b64`; mtime=0 keeps the output deterministic."""
    return base64.b64encode(gzip.compress(text.encode("utf-8"), mtime=0)).decode("ascii")


def render_cloud_init(
    env: Environment,
    *,
    compose: str,
    env_text: str,
    summary: str,
    benchmark_host: bool,
    workers: int,
    data_rules: list[str] | None = None,
) -> str:
    """Render `#cloud-config` user data, readable when it fits in Hetzner's 32 KiB, else with the files
    gzip+base64 encoded; refuse with the size when even that does not fit."""
    env.filters.setdefault("gzip_b64", gzip_b64)
    template = env.get_template("cloud-init.yaml.j2")
    for compressed in (False, True):
        text = template.render(
            compose=compose,
            env=env_text,
            summary=summary,
            benchmark_host=benchmark_host,
            compressed=compressed,
            stack_dir=STACK_DIR,
            marker_dir=MARKER_DIR,
            ready_marker=READY_MARKER,
            failed_marker=FAILED_MARKER,
            wait_timeout_s=WAIT_TIMEOUT_S,
            metadata_ip=METADATA_IP,
            metadata_block=metadata_block_script(data_rules),
            metadata_block_script=METADATA_BLOCK_SCRIPT,
            metadata_block_check=METADATA_BLOCK_CHECK,
        )
        size = len(text.encode("utf-8"))
        if size <= USER_DATA_LIMIT_BYTES:
            return text
    hint = f"try fewer --workers than {workers}" if workers > 1 else "shorten the kept .env entries"
    raise InputError(
        f"cloud-init user data would be {size:,} bytes even gzip-compressed, over Hetzner's user_data "
        f"limit of {USER_DATA_LIMIT_BYTES:,} bytes (32 KiB); {hint}, or deploy docker-compose.yml yourself"
    )
