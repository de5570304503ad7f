"""CPU per host and per role for a run whose samples name both (a lab's cluster, `bench --inventory lab.json`).

Every lab host is a network namespace on the same machine, so a host's own /proc/stat is the machine's: what a
host used is the sum of its processes' CPU (each process sampled with its role), not its host CPU figures.
"""

from __future__ import annotations

from collections import defaultdict

from n8n_sizer.report.model import RunData
from n8n_sizer.runs.stats import ROLES, within
from n8n_sizer.safety.text import printable


def cpu_by_host_role(samples, start_s: float, end_s: float) -> dict[str, dict[str, float]]:
    """{host: {role: mean CPU cores over [start, end)}}: each process' mean, summed per role on its host."""
    per_process: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for s in within(samples, start_s, end_s):
        if s.metric == "process_cpu_cores" and "role" in s.labels:
            per_process[(s.labels.get("host", "?"), s.labels["role"], s.labels.get("process", ""))].append(s.value)
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for (host, role, _), values in per_process.items():
        out[host][role] += sum(values) / len(values)
    return {h: dict(r) for h, r in out.items()}


def _cell(value: str) -> str:
    return printable(value, limit=120).replace("|", "\\|")  # host and role names come from the samples


def render_cpu_by_host(run: RunData) -> str:
    """Per target and step: mean CPU cores of each role on each host, and the host's total; "" without roles."""
    rows, roles_seen = [], set()
    for target in run.targets():
        samples = run.samples_of(target)
        for step, (start, end) in run.windows(target).items():
            for host, roles in sorted(cpu_by_host_role(samples, start, end).items()):
                roles_seen |= set(roles)
                rows.append((target, step, host, roles))
    if not rows:
        return ""
    roles = [r for r in ROLES if r in roles_seen] + sorted(roles_seen - set(ROLES))
    head = (
        "### CPU per host and role\n\nMean CPU cores over each step, per host, from each process sampled on "
        "its own host over SSH (a lab's hosts share one machine's cores, so a host's figure is the sum of its "
        "processes).\n\n"
        f"| target | step | host | {' | '.join(_cell(r) for r in roles)} | host total |\n|---|---|---|{'---:|' * (len(roles) + 1)}\n"
    )
    lines = [
        f"| {_cell(t)} | {_cell(step)} | {_cell(host)} | "
        + " | ".join(f"{r[role]:.2f}" if role in r else "-" for role in roles)
        + f" | {sum(r.values()):.2f} |"
        for t, step, host, r in rows
    ]
    return head + "\n".join(lines) + "\n"
