"""`FleetSpec`: a stack's config, parsed once and validated, with errors that name the config key.

A stack file (`stacks/Pulumi.<stack>.yaml`) holds the fleet under the project namespace:

    config:
      n8n-sizer:owner: alice
      n8n-sizer:ttl_hours: 4
      n8n-sizer:operator_cidr: 203.0.113.7/32
      n8n-sizer:provider: hetzner
      n8n-sizer:location: hel1
      n8n-sizer:loadgen: {size: cx33}
      n8n-sizer:targets:
        - {name: cx23-regular, size: cx23, setup: {mode: regular}}

Keys of other namespaces (`hcloud:token`, `gcp:project`) belong to the providers and are ignored here.
The Pulumi program reads the same keys through `pulumi.Config`, the `cost` command from the file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationError, field_validator, model_validator

from n8n_sizer.advisor.catalog import ServerSize, UnknownSize, find_size
from n8n_sizer.advisor.pools import setup_required_max_connections as required_max_connections
from n8n_sizer.advisor.setup import Setup
from n8n_sizer.errors import InputError
from n8n_sizer.fleet.locations import GCP_ZONE_RE, HETZNER_EU_ONLY_PREFIXES, HETZNER_LOCATIONS
from n8n_sizer.safety.frozen import Frozen
from n8n_sizer.safety.names import matching
from n8n_sizer.safety.network import check_ssh_cidr

NAMESPACE = "n8n-sizer"
NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,28}[a-z0-9]$")
STACK_RE = re.compile(r"^[a-z][a-z0-9-]{0,18}[a-z0-9]$")
OWNER_RE = re.compile(r"^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$")
SSH_KEY_RE = re.compile(r"^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/=]+( .*)?$")
MAX_TTL_HOURS = 168  # a week: a benchmark fleet left longer than that is a forgotten one

# What to tell the user when a top-level key is missing.
_MISSING_HINTS = {
    "owner": "pulumi config set n8n-sizer:owner <your-name>",
    "ttl_hours": "pulumi config set n8n-sizer:ttl_hours 4",
    "operator_cidr": "pulumi config set n8n-sizer:operator_cidr <your public IP>/32",
    "provider": "pulumi config set n8n-sizer:provider hetzner",
    "location": "pulumi config set n8n-sizer:location hel1 (Hetzner) or a GCP zone such as europe-west3-a",
    "loadgen": "add `n8n-sizer:loadgen: {size: cx33}` to the stack file",
    "targets": "add `n8n-sizer:targets:` with at least one {name, size, setup} entry",
}


HostName = Annotated[
    str,
    AfterValidator(
        matching(
            NAME_RE,
            "{value!r} is not a valid host name; use 2-30 lowercase "
            "letters, digits and dashes, starting with a letter, e.g. cx33-queue-2w",
        )
    ),
]


class HostSpec(Frozen):
    """One VM of the fleet. `provider`/`location` default to the fleet's and must equal them."""

    name: HostName
    size: str
    provider: Literal["hetzner", "gcp"] | None = None
    location: str | None = None

    @property
    def server(self) -> ServerSize:
        return find_size(self.size, self.provider)


class TargetSpec(HostSpec):
    setup: Setup
    # Postgres `max_connections` on the target; None: the renderer's default (100, or what the pools need).
    max_connections: int | None = Field(None, ge=1, le=262143)  # Postgres' own bound

    @model_validator(mode="after")
    def _pools_fit(self) -> TargetSpec:
        if self.max_connections is None:
            return self
        if self.setup.db != "postgres":
            raise _KeyError("max_connections", "applies to Postgres only; remove it or set setup.db: postgres")
        need = required_max_connections(self.setup)
        if self.max_connections < need:
            from n8n_sizer.advisor.pools import pool_arithmetic, setup_processes

            raise _KeyError(
                "max_connections",
                f"{self.max_connections} is below what n8n's pools need: "
                f"{pool_arithmetic(setup_processes(self.setup))}; set it to {need} or lower setup.db_pool_size",
            )
        return self


class LoadGenSpec(HostSpec):
    name: HostName = "loadgen"


class FleetSpec(Frozen):
    """The whole fleet of one stack: targets and a load generator in one provider location."""

    stack: Annotated[
        str,
        AfterValidator(
            matching(
                STACK_RE,
                "stack name {value!r} must be 2-20 lowercase letters, digits and dashes (it becomes a label value "
                "and part of resource names); try `pulumi stack init bench-1`",
            )
        ),
    ]
    owner: Annotated[
        str,
        AfterValidator(
            matching(
                OWNER_RE, "{value!r} is not a valid label value; use lowercase letters, digits, '-' or '_', e.g. alice"
            )
        ),
    ]
    ttl_hours: float = Field(gt=0, le=MAX_TTL_HOURS)
    operator_cidr: str = Field(max_length=43)
    allow_wide_ssh: bool = False  # an operator_cidr wider than a /16 is refused unless this says it is meant
    provider: Literal["hetzner", "gcp"]
    location: str
    ssh_public_key: str | None = None  # None: the program generates one with pulumi-tls
    loadgen: LoadGenSpec
    targets: tuple[TargetSpec, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _cidr(self) -> FleetSpec:
        # The one rule for SSH source ranges (safety/network.py): no host bits, no documentation range
        # other than at `pulumi up` (see `refuse_example_cidr`), nothing wider than a /16 unless allow_wide_ssh.
        if self.operator_cidr in ("0.0.0.0/0", "::/0"):
            raise _KeyError(
                "operator_cidr",
                f"{self.operator_cidr} would open SSH to the whole internet; use your own IP, e.g. 198.18.7.9/32",
            )
        try:
            check_ssh_cidr(self.operator_cidr, allow_wide=self.allow_wide_ssh, allow_example=True)
        except ValueError as exc:
            raise _KeyError("operator_cidr", str(exc).removeprefix("operator_cidr ")) from None
        return self

    @field_validator("ssh_public_key")
    @classmethod
    def _ssh_key(cls, v: str | None) -> str | None:
        if v is not None and not SSH_KEY_RE.fullmatch(v.strip()):
            raise ValueError(
                "not an OpenSSH public key; paste the one line of ~/.ssh/id_ed25519.pub, "
                "or remove the key to have one generated"
            )
        return v.strip() if v is not None else None

    @model_validator(mode="after")
    def _fleet_fits(self) -> FleetSpec:
        if self.provider == "hetzner" and self.location not in HETZNER_LOCATIONS:
            raise _KeyError(
                "location", f"{self.location!r} is not a Hetzner location; use one of " + ", ".join(HETZNER_LOCATIONS)
            )
        if self.provider == "gcp" and not GCP_ZONE_RE.fullmatch(self.location):
            raise _KeyError("location", f"{self.location!r} is not a GCP zone; use a zone such as europe-west3-a")
        hosts: list[tuple[str, HostSpec]] = [("loadgen", self.loadgen)]
        hosts += [(f"targets[{i}]", t) for i, t in enumerate(self.targets)]
        seen: set[str] = set()
        for key, host in hosts:
            for field, fleet_value in (("provider", self.provider), ("location", self.location)):
                value = getattr(host, field)
                if value is not None and value != fleet_value:
                    raise _KeyError(
                        f"{key}.{field}",
                        f"{value!r} differs from n8n-sizer:{field} "
                        f"{fleet_value!r}; the load generator and all targets share one "
                        f"{field} (remove the key or use a second stack)",
                    )
            try:
                server = find_size(host.size, self.provider)
            except UnknownSize as exc:
                raise _KeyError(f"{key}.size", f"{exc} ({self.provider})") from None
            if (
                self.provider == "hetzner"
                and server.size.startswith(HETZNER_EU_ONLY_PREFIXES)
                and HETZNER_LOCATIONS[self.location] != "eu-central"
            ):
                raise _KeyError(
                    f"{key}.size",
                    f"{server.size} is sold in Hetzner's EU locations only; "
                    "set n8n-sizer:location to fsn1, nbg1 or hel1",
                )
            if host.name in seen:
                raise _KeyError(f"{key}.name", f"{host.name!r} is used twice; give every host its own name")
            seen.add(host.name)
        return self

    def server_of(self, host: HostSpec) -> ServerSize:
        """The catalog entry of a host's size on this fleet's provider."""
        return find_size(host.size, self.provider)

    @property
    def hosts(self) -> tuple[HostSpec, ...]:
        return (self.loadgen, *self.targets)


class _KeyError(ValueError):
    """A fleet-level check that blames a specific key (pydantic would blame the whole model)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


def _key_of(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def parse_fleet_config(values: Mapping[str, Any], *, stack: str, model: type[FleetSpec] = FleetSpec) -> FleetSpec:
    """Validate the `n8n-sizer:` keys of a stack (namespace stripped) into `model` (a FleetSpec, or a
    ClusterSpec: `fleet.stackfile.parse_stack_config` chooses), or InputError."""
    unknown = sorted(set(values) - set(model.model_fields) - {"stack"})
    if unknown:
        raise InputError(
            f"{NAMESPACE}:{unknown[0]} is not a fleet setting; known settings: "
            + ", ".join(k for k in FleetSpec.model_fields if k != "stack")
        )
    for key, hint in _MISSING_HINTS.items():
        if key == "targets" and model is not FleetSpec:
            continue
        if values.get(key) in (None, "", [], {}):
            if key == "targets" and key in values:
                raise InputError(
                    f"{NAMESPACE}:targets is empty; a fleet needs at least one target: "
                    "add {name, size, setup} entries"
                )
            raise InputError(f"{NAMESPACE}:{key} is missing; set it: {hint}")
    targets = values.get("targets")
    if isinstance(targets, list):
        for i, target in enumerate(targets):
            # A pool is a Postgres setting: with SQLite it would be silently ignored.
            setup = target.get("setup") if isinstance(target, dict) else None
            if isinstance(setup, dict) and setup.get("db") == "sqlite" and "db_pool_size" in setup:
                raise InputError(
                    f"{NAMESPACE}:targets[{i}].setup.db_pool_size is set but db is sqlite, "
                    "which has no connection pool; remove db_pool_size or set db: postgres"
                )
    try:
        return model.model_validate({**values, "stack": stack})
    except ValidationError as exc:
        first = exc.errors()[0]
        cause = first.get("ctx", {}).get("error")
        key = _key_of(tuple(first["loc"]))
        if isinstance(cause, _KeyError):
            where = f"{key}.{cause.key}" if key else cause.key
            raise InputError(f"{NAMESPACE}:{where}: {cause.message}") from None
        if key == "stack":
            raise InputError(f"stack name: {first['msg'].removeprefix('Value error, ')}") from None
        msg = first["msg"].removeprefix("Value error, ")
        if first["type"] == "missing":
            msg = "is missing; add it to the stack file"
        elif first["type"] == "extra_forbidden":
            msg = "is not a known setting; check its spelling"
        else:
            msg = f"{msg} (got {first.get('input')!r})" if first["type"] != "value_error" else msg
        raise InputError(f"{NAMESPACE}:{key}: {msg}") from None


def stack_file(stack: str, stacks_dir: Path | str = "stacks") -> Path:
    return Path(stacks_dir) / f"Pulumi.{stack}.yaml"


def read_stack_config(path: Path) -> dict[str, Any]:
    """All `config:` entries of a stack file (every namespace), or InputError naming the file."""
    from n8n_sizer.safety.files import read_user_text
    from n8n_sizer.safety.yamldoc import MAX_YAML_BYTES, load_yaml

    if not os.path.lexists(path):
        raise InputError(f"stack file {path} does not exist; create it (see docs/fleet.md) or pass an existing --stack")
    fix = "fix the stack file (see docs/fleet.md)"
    doc = load_yaml(
        read_user_text(path, "stack file", fix=fix, max_bytes=MAX_YAML_BYTES), f"stack file {path}", fix=fix
    )
    config = (doc or {}).get("config") if isinstance(doc, dict) else None
    if not isinstance(config, dict):
        raise InputError(f"stack file {path} has no `config:` mapping; add the n8n-sizer:* keys under it")
    return config


def namespace_values(config: Mapping[str, Any], namespace: str = NAMESPACE) -> dict[str, Any]:
    prefix = f"{namespace}:"
    return {k[len(prefix) :]: v for k, v in config.items() if isinstance(k, str) and k.startswith(prefix)}
