"""Container probes for the fleet's Docker hosts: cgroup v2 counters, every second.

Seed 000 sampled "CPU and RAM per container (cgroup counters sampled every second)". cgroup counters are
cheap to read and cumulative, so a 1 s rate is exact (`docker stats` shows the same counters, averaged and
slower to ask). Note seed 004's trap: the counters include page cache as container memory, so a drop in memory can be the
kernel reclaiming cache, not a restart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from n8n_sizer.runs.records import Sample
from n8n_sizer.telemetry.probes import Probe, ProbeParseError, sample

_SECTION = "== container "


def parse_cpu_stat(text: str, time_s: float, labels: Mapping[str, str]) -> list[Sample]:
    """cgroup v2 `cpu.stat` -> `container_cpu_seconds_total` (usage_usec) and throttled time if present."""
    values = dict(line.split()[:2] for line in text.splitlines() if len(line.split()) >= 2)
    if "usage_usec" not in values:
        raise ProbeParseError("usage_usec missing from cpu.stat output")
    out = [sample("container_cpu_seconds_total", int(values["usage_usec"]) / 1e6, "s", time_s, labels)]
    if "throttled_usec" in values:
        out.append(
            sample("container_cpu_throttled_seconds_total", int(values["throttled_usec"]) / 1e6, "s", time_s, labels)
        )
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


def container_probes(cgroup_root: str = "/sys/fs/cgroup") -> list[Probe]:
    """Per-container probes for a Docker host (the fleet's targets)."""
    return [Probe("cgroup", cgroup_command(cgroup_root), parse_cgroup_sections)]


def _in_service(service: str) -> str:
    """`docker exec` into the running container of a Compose service (whatever its project prefix)."""
    return f"docker exec $(docker ps -q -f label=com.docker.compose.service={service} | head -n1) "


def compose_stack_probes(
    *, queue: bool, postgres: bool, main_url: str = "http://127.0.0.1:5678", metrics: bool = True
) -> list[Probe]:
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
