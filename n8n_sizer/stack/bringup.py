"""Bringing a target's n8n stack up on a host, one function per kind of host (the handles in stack/ call them).

- fleet host ("compose"): cloud-init started the rendered compose stack; wait for its ready marker (give up
  at once on the failed marker, printing it), then for main's `/healthz/readiness`; n8n's API is reached
  through an SSH tunnel, since 5678 is not open to the world.
- loopback SSH host ("native-ssh", the tests' sshd): no cloud-init there, so the local stack's
  native stack's program (`remote.native_stack up`) starts the stack detached (it survives a dropped SSH session,
  which `--resume` relies on), `status` re-attaches, `down` stops it.
"""

from __future__ import annotations

from contextlib import ExitStack
from ipaddress import ip_address
from typing import Literal

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.hosts.host import Host, SshHost

StackKind = Literal["local", "native-ssh", "compose", "lab"]  # "lab": a lab's cluster (lab.bench)
N8N_PORT = 5678  # the rendered compose stack publishes main on 5678 (templates/compose.yml.j2)


def stack_kind_for(public_ip: str) -> StackKind:
    """A fleet host runs the compose stack cloud-init started; a loopback host (the test sshd) has no
    cloud-init, so the stack is started on it over SSH with `native`."""
    try:
        return "native-ssh" if ip_address(public_ip).is_loopback else "compose"
    except ValueError:
        return "compose"


def native_up_args(setup: Setup) -> str:
    limit = f" --production-limit {setup.production_limit}" if setup.production_limit is not None else ""
    return (
        f"--mode {setup.mode} --workers {max(setup.workers, 1)} --db {setup.db} "
        f"--concurrency {setup.concurrency} --runner-concurrency {setup.runner_concurrency} "
        f"--db-pool-size {setup.db_pool_size}{limit}"
    )


def wait_compose_stack(host: Host, stack: ExitStack) -> str:
    """Wait for cloud-init's marker and main's readiness; returns main's URL as seen from here (a tunnel)."""
    from n8n_sizer.bundle.cloudinit import FAILED_MARKER, READY_MARKER, WAIT_TIMEOUT_S

    wait = (
        f"for i in $(seq 1 {int(WAIT_TIMEOUT_S) + 300}); do test -f {READY_MARKER} && exit 0; "
        f"test -f {FAILED_MARKER} && {{ cat {FAILED_MARKER} >&2; exit 3; }}; sleep 1; done; "
        f"echo 'no {READY_MARKER} yet' >&2; exit 4"
    )
    host.run(wait, timeout_s=WAIT_TIMEOUT_S + 360)
    host.run(
        f"curl -fsS --retry 30 --retry-delay 2 --retry-all-errors -o /dev/null "
        f"http://127.0.0.1:{N8N_PORT}/healthz/readiness",
        timeout_s=120,
    )
    if not isinstance(host, SshHost):
        return f"http://127.0.0.1:{N8N_PORT}"
    local_port = stack.enter_context(host.tunnel(N8N_PORT))
    return f"http://127.0.0.1:{local_port}"
