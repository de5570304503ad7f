"""Pulumi mocks for the fleet program: record every resource and invoke, answer like the providers.

`new_resource` echoes the inputs (as Pulumi's mock monitor expects) and adds the outputs the program
reads back: Hetzner numeric ids and `ipv4_address`, GCP `network_ip`/`nat_ip`, TLS key material.
`call` answers `hcloud:index/getImage:getImage` with a per-architecture image id, so a test can tell
which architecture's image a server was given.
"""

from __future__ import annotations

import asyncio
import json
import runpy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi

ROOT = Path(__file__).resolve().parents[2]
IMAGE_IDS = {"x86": 161547269, "arm": 161547270}  # arbitrary, distinct per architecture
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"  # Pulumi's marker for a secret value on the wire


def unsecret(value: Any) -> Any:
    """The plain value of an input that may arrive as a wrapped secret."""
    if isinstance(value, dict) and value.get("4dabf18193072939515e22adb298388d") == SECRET_SIG:
        return value["value"]
    return value


@dataclass
class Registered:
    typ: str
    name: str
    inputs: dict[str, Any]
    id: str = ""


@dataclass
class FleetMocks(pulumi.runtime.Mocks):
    resources: list[Registered] = field(default_factory=list)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        n = len(self.resources) + 1
        self.resources.append(Registered(args.typ, args.name, dict(args.inputs), str(1000 + n)))
        outputs = dict(args.inputs)
        if args.typ == "hcloud:index/server:Server":
            outputs["ipv4_address"] = f"198.51.100.{n}"
        if args.typ == "gcp:compute/instance:Instance":
            nic = dict(outputs["networkInterfaces"][0])
            nic["networkIp"] = f"10.89.0.{n}"
            nic["accessConfigs"] = [{"natIp": f"198.51.100.{n}"}]
            outputs["networkInterfaces"] = [nic]
        if args.typ == "gcp:compute/network:Network":
            outputs["selfLink"] = f"projects/p/global/networks/{args.inputs.get('name')}"
        if args.typ == "tls:index/privateKey:PrivateKey":
            outputs["publicKeyOpenssh"] = (
                "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMockMockMockMockMockMockMockMockMockMockMock"
            )
            outputs["privateKeyOpenssh"] = (
                "-----BEGIN OPENSSH PRIVATE KEY-----\nmock\n-----END OPENSSH PRIVATE KEY-----\n"
            )
        # hcloud ids are integers on the wire (the program passes firewall ids as int).
        return [str(1000 + n), outputs]

    def call(self, args: pulumi.runtime.MockCallArgs):
        self.calls.append((args.token, dict(args.args)))
        if args.token == "hcloud:index/getImage:getImage":
            arch = args.args.get("withArchitecture", "x86")
            return {"id": IMAGE_IDS[arch], "architecture": arch, "name": args.args.get("name")}
        return {}

    def of_type(self, typ: str) -> list[Registered]:
        return [r for r in self.resources if r.typ == typ]


def config_strings(config: dict[str, Any]) -> dict[str, str]:
    """Stack file values as the engine hands them to a program: strings, structures as JSON."""
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}


def _ensure_event_loop() -> None:
    """Pulumi's runtime needs a current event loop; a test that ran `asyncio.run` earlier unset it."""
    try:
        loop = asyncio.get_event_loop()
    except RuntimeError:
        loop = None
    if loop is None or loop.is_closed():
        asyncio.set_event_loop(asyncio.new_event_loop())


# The shipped stack files carry the RFC 5737 placeholder 203.0.113.7/32, which `pulumi up` refuses (an
# example range is nobody's address): these tests stand in for a user who set their own, this one.
PLACEHOLDER, OPERATOR = "203.0.113.7/32", "198.18.7.9/32"


def run_program(
    stack: str, config: dict[str, Any], body: Callable[[], Any], *, keep_placeholder: bool = False
) -> FleetMocks:
    """Run `body` as a Pulumi program of `stack` with `config`, under fresh mocks; return the mocks."""
    if not keep_placeholder and config.get("n8n-sizer:operator_cidr") == PLACEHOLDER:
        config = {**config, "n8n-sizer:operator_cidr": OPERATOR}
    _ensure_event_loop()
    mocks = FleetMocks()
    pulumi.runtime.set_mocks(mocks, project="n8n-sizer", stack=stack, preview=False)
    pulumi.runtime.set_all_config(config_strings(config))

    @pulumi.runtime.test
    def program():
        return body()

    program()
    return mocks


def run_main(stack: str, config: dict[str, Any]) -> tuple[FleetMocks, dict[str, Any]]:
    """Run the real `__main__.py` for a stack; return the mocks and the program's globals."""
    globals_: dict[str, Any] = {}

    def body():
        globals_.update(runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__"))
        return globals_["fleet"].inventory

    return run_program(stack, config, body), globals_
