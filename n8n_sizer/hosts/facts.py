"""Host facts, pyinfra style: one shell command, one pure parser (tested on captured output)."""

from __future__ import annotations

from n8n_sizer.hosts.host import Host
from n8n_sizer.safety.frozen import Frozen

# One line per fact, `key=value`; every piece falls back to an empty value rather than failing the run.
FACTS_COMMAND = (
    'echo "vcpu=$(nproc 2>/dev/null)"; '
    "echo \"cpu_model=$(LC_ALL=C lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -n1)\"; "
    "echo \"mem_kib=$(awk '/^MemTotal:/{print $2}' /proc/meminfo)\"; "
    'echo "kernel=$(uname -r)"; echo "arch=$(uname -m)"; '
    "echo \"disk_root_kib=$(df -Pk / | awk 'NR==2{print $2}')\"; "
    "echo \"disk_root_free_kib=$(df -Pk / | awk 'NR==2{print $4}')\"; "
    'echo "os=$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"'
)


class HostFacts(Frozen):
    vcpu: int | None
    cpu_model: str | None
    ram_mib: float | None
    kernel: str | None
    arch: str | None
    disk_root_gib: float | None
    disk_root_free_gib: float | None
    os: str | None


def parse_facts(text: str) -> HostFacts:
    """Parse FACTS_COMMAND's output. A missing or empty value stays None."""
    raw: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and value.strip():
            raw[key.strip()] = value.strip()

    def num(key: str, scale: float) -> float | None:
        try:
            return round(int(raw[key]) / scale, 1) if key in raw else None
        except ValueError:
            return None

    vcpu = raw.get("vcpu")
    return HostFacts(
        vcpu=int(vcpu) if vcpu and vcpu.isdigit() else None,
        cpu_model=raw.get("cpu_model"),
        ram_mib=num("mem_kib", 1024),
        kernel=raw.get("kernel"),
        arch=raw.get("arch"),
        disk_root_gib=num("disk_root_kib", 1024**2),
        disk_root_free_gib=num("disk_root_free_kib", 1024**2),
        os=raw.get("os"),
    )


def host_facts(host: Host, timeout_s: float = 30.0) -> HostFacts:
    return parse_facts(host.run(FACTS_COMMAND, timeout_s=timeout_s).stdout)
