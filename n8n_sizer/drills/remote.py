"""Drill targets on a host reached over SSH (Fabric): a fleet host's compose stack, or a loopback host's
local stack (the tests' sshd). n8n's API and webhooks are reached through an SSH tunnel to main's port,
since 5678 is open only to the load generator; everything else is a command on the host.

    with remote_drill_stack("cx33-queue-2w", SshHost(...), "compose", setup, login_file=...) as ctx:
        run_drill("kill-worker", ctx, Path("results"))
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from n8n_sizer.advisor.setup import Setup
from n8n_sizer.drills.common import DrillContext
from n8n_sizer.errors import InputError
from n8n_sizer.hosts.host import Host
from n8n_sizer.stack.bringup import StackKind
from n8n_sizer.stack.handle import StackHandle
from n8n_sizer.stack.remote import ComposeHandle, SshNativeHandle


def require_drillable(name: str, setup: Setup | None) -> None:
    if setup is None or setup.mode != "queue" or setup.workers < 2:
        what = f"runs {setup.mode} mode with {setup.workers} workers" if setup else "has no n8n setup"
        raise InputError(
            f"--target {name}: {what}; the drills need a queue-mode target with at least 2 workers; "
            f"add one to the stack file and `pulumi up`"
        )


@contextmanager
def remote_drill_stack(
    name: str,
    host: Host,
    kind: StackKind,
    setup: Setup,
    login_file: Path | None = None,
    extra_env: dict[str, str] | None = None,
    state_dir: str | None = None,
) -> Iterator[DrillContext]:
    """A `DrillContext` on a host over SSH: the fleet host's compose stack as it runs (n8n set up with the
    saved login, or set up now and the login saved), or a loopback host's local stack started for the drills
    (with `extra_env`) and stopped after them."""
    from n8n_sizer.n8n.client import set_up_instance
    from n8n_sizer.n8n.link import saved_or_new_session

    require_drillable(name, setup)
    with ExitStack() as stack:
        stack.callback(host.close)  # registered first: runs last
        target: StackHandle
        if kind == "compose":
            target = ComposeHandle(name, host, setup)
            target.up(stack)
            session = saved_or_new_session(target.main_url, login_file, name)
        elif kind == "native-ssh":
            target = SshNativeHandle(
                name, host, setup, state_dir or f"/tmp/n8n-sizer-drill-{name}-{time.time_ns()}", extra_env
            )
            target.up(stack)
            session = set_up_instance(target.main_url)  # a new instance each time: nothing to save
        else:
            raise InputError(f"--target {name}: drills run on a fleet host or a loopback SSH host, not {kind}")
        yield DrillContext(stack=target, session=session)
