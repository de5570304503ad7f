"""Read a Docker Compose file the way `check` needs it: interpolated, with each service's role.

`${VAR}` references resolve from the given env mapping, as Compose resolves them from `.env`; a
reference with no value and no default stays as written (so two services that share one unresolved
`${N8N_ENCRYPTION_KEY}` still compare equal) and is listed in `unresolved`, never guessed.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any, Literal

from n8n_sizer.errors import InputError
from n8n_sizer.safety.frozen import Frozen

Role = Literal["main", "worker", "webhook", "runner", "postgres", "redis", "proxy", "other"]
_REF = re.compile(
    r"\$(?:\$|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])((?:[^{}]|\{[^{}]*\})*))?\}|([A-Za-z_][A-Za-z0-9_]*))"
)
_PROXIES = {"caddy", "nginx", "traefik", "haproxy", "envoy", "nginx-proxy-manager", "swag"}
_REDIS = {"redis", "valkey", "keydb", "redis-stack-server", "dragonfly"}
LOOPBACK = {"127.0.0.1", "::1", "localhost", "[::1]"}


class Port(Frozen):
    """One published port: container port and the host address it listens on ('' = every address)."""

    container_port: int
    host_ip: str
    host_port: int | None = None  # None: Docker picks one (or a range was given)

    @property
    def public(self) -> bool:
        return self.host_ip not in LOOPBACK


class Service(Frozen):
    name: str
    role: Role
    image: str | None
    env: dict[str, str]
    command: list[str]
    depends_on: dict[str, str]  # service -> condition
    has_healthcheck: bool
    stop_grace_s: float | None
    ports: list[Port]
    host_network: bool
    labels: dict[str, str]
    volumes: list[tuple[str, str]]  # (source, target)
    aliases: list[str]  # service name, container_name, hostname
    mem_limit_mib: float | None = None  # mem_limit, or deploy.resources.limits.memory
    mem_reservation_mib: float | None = None  # mem_reservation, or deploy.resources.reservations.memory


class ComposeFile(Frozen):
    services: list[Service]
    unresolved: list[str]
    config_texts: list[str]  # inline `configs:` contents (e.g. a Caddyfile)

    def by_role(self, *roles: Role) -> list[Service]:
        return [s for s in self.services if s.role in roles]

    @property
    def n8n(self) -> list[Service]:
        return self.by_role("main", "worker", "webhook")

    @property
    def queue_mode(self) -> bool:
        return any(s.role == "worker" or s.env.get("EXECUTIONS_MODE") == "queue" for s in self.n8n)


def interpolate(text: str, env: Mapping[str, str], missing: set[str], budget: list[int] | None = None) -> str:
    """Compose's interpolation: $$, ${VAR}, ${VAR:-d}, ${VAR-d}, ${VAR:?e}, ${VAR?e}, ${VAR:+a}, $VAR.

    `budget` ([characters left]) bounds what the substitutions may add in total: a compose file with a
    million `${X}` and a .env whose X is a megabyte would otherwise expand to a terabyte."""

    def replace(match: re.Match[str]) -> str:
        value = _replace(match)
        if budget is not None:
            budget[0] -= len(value)
            if budget[0] < 0:
                raise InputError(
                    "the compose file expands past the size limit once its ${VAR} references are "
                    "filled in from the .env; fix the compose file or the .env, then run check again"
                )
        return value

    def _replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1) or match.group(4)
        op, arg = match.group(2), match.group(3) or ""
        value = env.get(name)
        if op in (":-", "-"):
            if value is None or (op == ":-" and value == ""):
                return interpolate(arg, env, missing, budget)
            return value
        if op in (":+", "+"):
            present = value is not None and (op == "+" or value != "")
            return interpolate(arg, env, missing, budget) if present else ""
        if value is None or (op == ":?" and value == ""):
            missing.add(name)
            return match.group(0)
        return value

    return _REF.sub(replace, text)


def _walk(node: Any, env: Mapping[str, str], missing: set[str], budget: list[int] | None = None) -> Any:
    if isinstance(node, str):
        return interpolate(node, env, missing, budget)
    if isinstance(node, list):
        return [_walk(item, env, missing, budget) for item in node]
    if isinstance(node, dict):
        return {key: _walk(value, env, missing, budget) for key, value in node.items()}
    return node


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _env_of(
    spec: dict, env: Mapping[str, str], env_files: Mapping[str, Mapping[str, str]], missing: set[str]
) -> dict[str, str]:
    values: dict[str, str] = {}
    files = spec.get("env_file") or []
    for entry in [files] if isinstance(files, (str, dict)) else files:
        path = entry.get("path", "") if isinstance(entry, dict) else str(entry)
        if path in env_files:
            values.update(env_files[path])
        else:
            missing.add(f"env_file:{path}")
    raw = spec.get("environment") or {}
    if isinstance(raw, list):
        raw = dict(item.split("=", 1) if "=" in item else (item, None) for item in map(str, raw))
    for key, value in raw.items():
        if value is None:  # `KEY` alone: taken from the environment Compose runs in
            if key in env:
                values[key] = env[key]
            else:
                missing.add(key)
        else:
            values[key] = _scalar(value)
    return values


def _ports(spec: dict) -> list[Port]:
    ports: list[Port] = []
    for entry in spec.get("ports") or []:
        if isinstance(entry, dict):
            target = entry.get("target")
            if target is not None:
                published = _scalar(entry.get("published"))
                host_port = int(published) if published.isdigit() and len(published) <= 5 else None
                ports += [
                    Port(container_port=n, host_ip=_scalar(entry.get("host_ip")), host_port=host_port)
                    for n in _port_range(_scalar(target))
                ]
            continue
        text = _scalar(entry).split("/", 1)[0]
        host_ip = ""
        if text.startswith("[") and "]" in text:  # [::1]:5678:5678
            host_ip, text = text[1:].split("]", 1)
            text = text.lstrip(":")
        parts = text.rsplit(":", 2) if text.count(":") >= 2 else text.split(":")
        if len(parts) == 3:
            host_ip = parts[0]
        container = parts[-1]
        host_port = parts[-2] if len(parts) >= 2 else ""
        for number in _port_range(container):
            ports.append(
                Port(container_port=number, host_ip=host_ip, host_port=int(host_port) if host_port.isdigit() else None)
            )
    return ports


MAX_PORT = 65535


def _port_range(text: str) -> list[int]:
    """Container ports of `5678` or `8000-8010`; nothing for text that is not a valid port or range (a
    range is bounded by 1..65535, so `1-99999999` cannot make a hundred million ports)."""
    text = text.strip()
    if "-" in text:
        low, high = text.split("-", 1)
        if not (low.isdigit() and high.isdigit() and len(low) <= 5 and len(high) <= 5):
            return []
        first, last = int(low), int(high)
        return list(range(first, last + 1)) if 1 <= first <= last <= MAX_PORT else []
    return [int(text)] if text.isdigit() and len(text) <= 5 and 1 <= int(text) <= MAX_PORT else []


def duration_s(value: Any) -> float | None:
    """Compose durations: '60s', '1m30s', '1h', '500ms', '2us' or a bare number of seconds."""
    if value is None:
        return None
    text = _scalar(value).strip()
    if len(text) > 64:  # no real duration is longer; a long digit run would make the findall below quadratic
        return None
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|ns|h|m|s)", text)
    if not parts or "".join(a + b for a, b in parts) != text:
        return None
    return sum(float(number) * units[unit] for number, unit in parts)


def image_base(image: str) -> tuple[str, str | None, str | None]:
    """(repository, tag, digest) of an image reference."""
    digest = None
    if "@" in image:
        image, digest = image.split("@", 1)
    last = image.rsplit("/", 1)[-1]
    if ":" in last:
        repo, tag = image.rsplit(":", 1)
        return repo, tag, digest
    return image, None, digest


def _role(image: str | None, command: list[str], env: dict[str, str]) -> Role:
    repo = image_base(image)[0].lower() if image else ""
    base = repo.rsplit("/", 1)[-1]
    if base == "n8n":
        if "worker" in command:
            return "worker"
        return "webhook" if "webhook" in command else "main"
    if base == "runners" or (base != "n8n" and "N8N_RUNNERS_TASK_BROKER_URI" in env):
        return "runner"
    if base.startswith("postgres") or base in ("postgis", "pgvector"):
        return "postgres"
    if base in _REDIS:
        return "redis"
    if base in _PROXIES:
        return "proxy"
    return "other"


def _service(
    name: str, spec: dict, env: Mapping[str, str], env_files: Mapping[str, Mapping[str, str]], missing: set[str]
) -> Service:
    image = _scalar(spec.get("image")) or None
    raw_command = spec.get("command") or []
    try:
        command = shlex.split(raw_command) if isinstance(raw_command, str) else [_scalar(c) for c in raw_command]
    except ValueError:
        command = str(raw_command).split()
    service_env = _env_of(spec, env, env_files, missing)
    raw_deps = spec.get("depends_on") or {}
    if isinstance(raw_deps, list):
        deps = {str(dep): "service_started" for dep in raw_deps}
    else:
        deps = {str(dep): _scalar((cfg or {}).get("condition")) or "service_started" for dep, cfg in raw_deps.items()}
    health = spec.get("healthcheck")
    has_health = (
        isinstance(health, dict)
        and not health.get("disable")
        and bool(health.get("test"))
        and health.get("test") != ["NONE"]
    )
    labels = spec.get("labels") or {}
    if isinstance(labels, list):
        labels = dict(item.split("=", 1) if "=" in item else (item, "") for item in map(str, labels))
    volumes: list[tuple[str, str]] = []
    for entry in spec.get("volumes") or []:
        if isinstance(entry, dict):
            volumes.append((_scalar(entry.get("source")), _scalar(entry.get("target"))))
        else:
            parts = _scalar(entry).split(":")
            volumes.append((parts[0], parts[1]) if len(parts) >= 2 else ("", parts[0]))
    aliases = [name] + [_scalar(spec[k]) for k in ("container_name", "hostname") if spec.get(k)]
    return Service(
        name=name,
        role=_role(image, command, service_env),
        image=image,
        env=service_env,
        command=command,
        depends_on=deps,
        has_healthcheck=has_health,
        stop_grace_s=duration_s(spec.get("stop_grace_period")),
        ports=_ports(spec),
        host_network=_scalar(spec.get("network_mode")) == "host",
        labels={str(k): _scalar(v) for k, v in labels.items()},
        volumes=volumes,
        aliases=aliases,
        mem_limit_mib=_mem_limit(spec),
        mem_reservation_mib=_mem_limit(spec, "mem_reservation", "reservations"),
    )


def _mem_limit(spec: dict, key: str = "mem_limit", deploy_key: str = "limits") -> float | None:
    from n8n_sizer.bundle.limits import parse_memory_mib

    deploy = spec.get("deploy") if isinstance(spec.get("deploy"), dict) else {}
    limits = (
        ((deploy.get("resources") or {}).get(deploy_key) or {}) if isinstance(deploy.get("resources"), dict) else {}
    )
    return parse_memory_mib(spec.get(key)) or parse_memory_mib(
        limits.get("memory") if isinstance(limits, dict) else None
    )


def load_compose(
    text: str,
    env: Mapping[str, str] | None = None,
    env_files: Mapping[str, Mapping[str, str]] | None = None,
    source: str = "the compose file",
) -> ComposeFile:
    """Parse and interpolate a compose file; `InputError` when it is not a compose mapping."""
    from n8n_sizer.bundle.compose_source import parse_compose_doc

    doc = parse_compose_doc(text, source)
    from n8n_sizer.safety.yamldoc import MAX_EXPANDED

    env = dict(env or {})
    missing: set[str] = set()
    budget = [MAX_EXPANDED]  # shared by every service: the whole file's substitutions
    services = []
    for name, spec in doc["services"].items():
        try:
            services.append(_service(str(name), _walk(spec or {}, env, missing, budget), env, env_files or {}, missing))
        except InputError:
            raise
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            # check_shape covers the keys check reads; this keeps an overlooked corner to one line.
            shown = str(name).encode("unicode_escape").decode("ascii")[:120]
            raise InputError(
                f"the compose file's services.{shown} has a value check cannot read "
                f"({type(exc).__name__}); fix the compose file, then run check again"
            ) from None
    configs = doc.get("configs") or {}
    texts = [_scalar(c.get("content")) for c in configs.values() if isinstance(c, dict) and c.get("content")]
    return ComposeFile(services=services, unresolved=sorted(missing), config_texts=texts)


class RedisUser(Frozen):
    password: str | None  # None: none given on the command line
    rules: tuple[str, ...] = ()


def redis_users(redis: Service) -> dict[str, RedisUser]:
    """The users a `redis-server` command line defines: `--requirepass` is the default user's password, each
    `--user NAME on >PASSWORD RULES...` an ACL user."""
    tokens, users = redis.command, {}
    for i, token in enumerate(tokens):
        if token == "--requirepass" and i + 1 < len(tokens):
            users["default"] = RedisUser(password=tokens[i + 1], rules=("~*", "&*", "+@all"))
        elif token == "--user" and i + 1 < len(tokens):
            words = []
            for word in tokens[i + 2 :]:
                if word.startswith("--"):
                    break
                words.append(word)
            users[tokens[i + 1]] = RedisUser(
                password=next((w[1:] for w in words if w.startswith(">")), None),
                rules=tuple(w for w in words if not w.startswith(">")),
            )
    return users
