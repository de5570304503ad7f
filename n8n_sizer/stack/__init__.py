"""A stack on a host: one protocol (`StackHandle`) that the bench and the drills both drive.

Owns: the protocol and log marks (`handle`), the local implementation (`local`), the SSH implementations for a
host running the native stack or a compose stack (`remote`), and bringing a stack up on a host (`bringup`).
`open_stack` picks the implementation for a target's kind.
May import: advisor, bundle (cloud-init markers), hosts, native, telemetry (sampler arguments), errors.
"""

from __future__ import annotations

from n8n_sizer.stack.bringup import StackKind
from n8n_sizer.stack.handle import StackHandle


def open_stack(
    kind: StackKind,
    name: str,
    host,
    setup,
    *,
    state_dir: str | None = None,
    stack_options: dict | None = None,
    extra_env: dict[str, str] | None = None,
) -> StackHandle:
    """The handle for a target: "local" (this machine, by PID), "native-ssh" (the native stack started on a
    host over SSH, in `state_dir`) or "compose" (the compose stack cloud-init started on a fleet host)."""
    if kind == "local":
        from n8n_sizer.native.stack import LocalStack, StackOptions
        from n8n_sizer.stack.local import LocalHandle

        return LocalHandle(LocalStack(setup, StackOptions(**(stack_options or {}))), name)
    if kind == "native-ssh":
        from n8n_sizer.stack.remote import SshNativeHandle

        if state_dir is None:
            raise ValueError("a native-ssh stack needs its state folder")
        return SshNativeHandle(name, host, setup, state_dir, extra_env)
    from n8n_sizer.stack.remote import ComposeHandle

    return ComposeHandle(name, host, setup)
