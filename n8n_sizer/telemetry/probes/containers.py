"""Container probes for the fleet's Docker hosts: cgroup v2 counters (every second) and `docker stats`.

Seed 000 sampled "CPU and RAM per container (cgroup counters sampled every second)". cgroup counters are
cheap to read and cumulative, so a 1 s rate is exact; `docker stats` is kept as the cross-check people
know. Note seed 004's trap: both count page cache as container memory, so a drop in memory can be the
kernel reclaiming cache, not a restart.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace

from n8n_sizer.telemetry.probes import Probe, ProbeParseError, sample
from n8n_sizer.runs.records import Sample

_SECTION = "== container "


def parse_cpu_stat(text: str, time_s: float, labels: Mapping[str, str]) -> list[Sample]:
    """cgroup v2 `cpu.stat` -> `container_cpu_seconds_total` (usage_usec) and throttled time if present."""
    values = dict(line.split()[:2] for line in text.splitlines() if len(line.split()) >= 2)
    if "usage_usec" not in values:
        raise ProbeParseError("usage_usec missing from cpu.stat output")
    out = [sample("container_cpu_seconds_total", int(values["usage_usec"]) / 1e6, "s", time_s, labels)]
    if "throttled_usec" in values:
        out.append(sample("container_cpu_throttled_seconds_total", int(values["throttled_usec"]) / 1e6, "s", time_s, labels))
    return out


def parse_memory_current(text: str, time_s: float, labels: Mapping[str, str]) -> list[Sample]:
    """cgroup v2 `memory.current` (or v1 `memory.usage_in_bytes`, same format): one integer of bytes."""
    token = text.strip()
    if not token.isdigit():
        raise ProbeParseError(f"memory.current is not one integer: {token[:60]!r}")
    return [sample("container_mem_mib", int(token) / 2**20, "MiB", time_s, labels)]


def cgroup_command(cgroup_root: str = "/sys/fs/cgroup") -> str:
    """Every running container's cpu.stat and memory.current, one section per container.

    One `docker ps` per tick (no `docker inspect` per container). A container is named by its Compose
    service (`n8n-main`, `n8n-worker-1`, `n8n-runner-main`...) when it has one, else by its name. Docker's
    systemd cgroup driver (Debian/Ubuntu default on cgroup v2) puts it in `system.slice/docker-<id>.scope`,
    the cgroupfs driver in `docker/<id>`.
    """
    fmt = '{{.ID}} {{.Names}} {{.Label "com.docker.compose.service"}}'
    return (
        f"docker ps --no-trunc --format '{fmt}' | while read -r id name service; do "
        f'd={cgroup_root}/system.slice/docker-$id.scope; [ -d "$d" ] || d={cgroup_root}/docker/$id; '
        f'echo "{_SECTION}${{service:-$name}}"; cat "$d/cpu.stat"; echo \'-- memory.current\'; cat "$d/memory.current"; '
        "done"
    )


def parse_cgroup_sections(text: str, time_s: float, labels: Mapping[str, str]) -> list[Sample]:
    """Output of `cgroup_command` -> per container (label `container`) CPU seconds and memory."""
    out: list[Sample] = []
    for section in text.split(_SECTION)[1:]:
        name, _, body = section.partition("\n")
        cpu, _, mem = body.partition("-- memory.current\n")
        lab = {**labels, "container": name.strip()}
        out += parse_cpu_stat(cpu, time_s, lab) + parse_memory_current(mem, time_s, lab)
    return out


_SIZE = re.compile(r"^\s*([\d.]+)\s*([KMGTP]?i?B)\s*$")
_FACTOR = {"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
           "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def _bytes(text: str) -> float:
    m = _SIZE.match(text.replace("kB", "KB"))
    if not m or m.group(2) not in _FACTOR:
        raise ProbeParseError(f"unreadable size {text!r} in docker stats")
    return float(m.group(1)) * _FACTOR[m.group(2)]


def parse_docker_stats(text: str, time_s: float, labels: Mapping[str, str]) -> list[Sample]:
    """`docker stats --no-stream --format '{{json .}}'` -> per container CPU cores and memory used.

    CPUPerc is percent of ONE core (200% = two cores busy), so cores = CPUPerc / 100.
    """
    out: list[Sample] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        lab = {**labels, "container": row["Name"]}
        out.append(sample("container_cpu_cores", float(row["CPUPerc"].rstrip("%")) / 100, "cores", time_s, lab))
        used, _, limit = row["MemUsage"].partition("/")
        out.append(sample("container_mem_mib", _bytes(used) / 2**20, "MiB", time_s, lab))
        if limit.strip():
            out.append(sample("container_mem_limit_mib", _bytes(limit) / 2**20, "MiB", time_s, lab))
    return out


def container_probes(cgroup_root: str = "/sys/fs/cgroup") -> list[Probe]:
    """Per-container probes for a Docker host (the fleet's targets)."""
    return [Probe("cgroup", cgroup_command(cgroup_root), parse_cgroup_sections)]


def docker_stats_probe() -> Probe:
    return Probe("docker_stats", "docker stats --no-stream --format '{{json .}}'", parse_docker_stats)


def _in_service(service: str) -> str:
    """`docker exec` into the running container of a Compose service (whatever its project prefix)."""
    return f'docker exec $(docker ps -q -f label=com.docker.compose.service={service} | head -n1) '


def compose_stack_probes(*, queue: bool, postgres: bool, main_url: str = "http://127.0.0.1:5678",
                         metrics: bool = True) -> list[Probe]:
    """Probes for a host running the rendered Compose stack (templates/compose.yml.j2): host, cgroups,
    Redis and Bull inside `n8n-redis` (its REDISCLI_AUTH env holds the password), pg_stat_activity inside
    `n8n-postgres` over its local socket, and main's /metrics (the stack turns queue metrics on)."""
    from n8n_sizer.telemetry.probes.host import host_probes
    from n8n_sizer.telemetry.probes.services import n8n_metrics_probe, postgres_probe, redis_probes

    # Every `docker exec` forks the Docker CLI and asks the engine on the measured host itself, so the
    # in-container probes run every 2nd tick; the cgroup counters (plain files) every tick.
    probes = host_probes() + container_probes()
    if queue:
        probes += [replace(p, every=2) for p in redis_probes(prefix=_in_service("n8n-redis"))]
    if postgres or queue:
        probes.append(replace(postgres_probe(host="/var/run/postgresql", prefix=_in_service("n8n-postgres")), every=2))
    if metrics:
        probes.append(n8n_metrics_probe(main_url))
    return probes
