"""`lab up`, `lab down`: a topology as network namespaces on this machine (n8n_sizer.lab, docs/lab.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

LAB_HELP = """Hosts of a topology as network namespaces on this machine, each with its own sshd (needs root).

Example: n8n-sizer lab up --topology advice.json --generators 2 --out lab.json
"""

UP_HELP = """Make one namespace per topology host plus N load generators on a private bridge, each with its
address from the topology's subnet and its own sshd; write the inventory (hosts, roles, addresses, the lab's
state). A failure or Ctrl-C removes everything it made. Needs root.

Example: n8n-sizer lab up --topology advice.json --generators 2 --out lab.json
"""

DEPLOY_HELP = """Deploy the lab's topology over SSH, role by role: Postgres and Redis on the data host, main, the
webhook processors and Caddy (the rendered routing) on the ingest host, the workers on theirs. Prints the
URL the generators load. Needs the shared n8n install and Debian's postgresql, redis-server and caddy.

Example: n8n-sizer lab deploy --inventory lab.json
"""

DOWN_HELP = """Remove a lab by name and PID: every process in its namespaces, the namespaces, links, bridge
and keys; then the inventory file. Needs root.

Example: n8n-sizer lab down --inventory lab.json
"""


def register(app: typer.Typer) -> None:
    lab = typer.Typer(help=LAB_HELP, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
    lab.command("up", help=UP_HELP)(up)
    lab.command("deploy", help=DEPLOY_HELP)(deploy)
    lab.command("down", help=DOWN_HELP)(down)
    app.add_typer(lab, name="lab")


def up(
    topology: Path = typer.Option(..., "--topology", help='What `advise --json` prints, or {"topology": [...]}.'),
    generators: int = typer.Option(1, "--generators", help="Load-generator namespaces gen-1..N (1 to 8)."),
    out: Path = typer.Option(..., "--out", help="Inventory file to write (never overwritten)."),
    sshd_path: str = typer.Option("/usr/sbin/sshd", "--sshd", help="The OpenSSH server binary."),
    json_out: bool = typer.Option(False, "--json", help="Print the lab's hosts and addresses as one JSON object."),
    cpu_cores: float = typer.Option(
        None,
        "--cpu-cores",
        help="Cores of this machine the hosts' CPU budgets share (default: all but 0.5, left to the generators).",
    ),
    no_cpu_budget: bool = typer.Option(False, "--no-cpu-budget", help="No cgroup quota: every host shares every core."),
) -> None:
    from n8n_sizer.bundle.topology import load_topology_text
    from n8n_sizer.lab.netns import lab_up, require_root
    from n8n_sizer.safety.files import read_user_text

    require_root("lab up")
    text = read_user_text(topology, "--topology", fix="pass the output of `advise --json`")
    topo = load_topology_text(text, f"--topology {topology}")
    try:
        state = lab_up(topo, generators, out, sshd_path=sshd_path, cpu_budget=not no_cpu_budget, cpu_cores=cpu_cores)
    except KeyboardInterrupt:  # lab_up has already removed what it made (SIGTERM and SIGHUP end here too)
        print("n8n-sizer: lab up interrupted; everything it had made is removed", file=sys.stderr)
        raise typer.Exit(130) from None
    inventory = json.loads(read_user_text(out, "--out", fix="run lab up again", max_bytes=1 << 20))
    hosts = {name: {"address": h["private_ip"], "role": h["role"]} for name, h in inventory["hosts"].items()}
    if json_out:
        print(
            json.dumps(
                {
                    "lab_id": state.lab_id,
                    "inventory": str(out),
                    "bridge": state.bridge,
                    "subnet": state.subnet,
                    "ssh_key": state.client_key,
                    "ssh_user": "root",
                    "hosts": hosts,
                    "cpu": state.cpu.model_dump(mode="json") if state.cpu else None,
                },
                indent=2,
            )
        )
        return
    print(f"lab {state.lab_id} up on bridge {state.bridge} ({state.subnet}); inventory: {out}")
    budget = state.cpu
    for name, h in hosts.items():
        own = budget.host(name) if budget else None
        print(f"  {name:16} {h['role']:8} {h['address']}" + (f"  {own.cores:g} cores ({own.vcpu} vCPU)" if own else ""))
    if budget:
        print(
            f"CPU: {budget.usable_cores:g} of {budget.machine_cores} cores for {budget.total_vcpu} vCPU, "
            f"scale {budget.scale:.3g} (cgroup {budget.group})"
        )
    print(f"ssh: ssh -i {state.client_key} root@ADDRESS; remove it all: n8n-sizer lab down --inventory {out}")


def deploy(
    inventory: Path = typer.Option(..., "--inventory", help="The lab.json that `lab up --out` wrote."),
    json_out: bool = typer.Option(False, "--json", help="Print the URL and every process as one JSON object."),
) -> None:
    from n8n_sizer.lab.deploy import deploy_lab

    cluster = deploy_lab(inventory)
    if json_out:
        print(cluster.model_dump_json(indent=2))
        return
    print(f"lab deployed; load it at {cluster.url}")
    for host, procs in cluster.processes.items():
        print(f"  {host:16} " + ", ".join(f"{p.name} (PID {p.pid})" for p in procs))


def down(
    inventory: Path = typer.Option(..., "--inventory", help="The lab.json that `lab up --out` wrote."),
    json_out: bool = typer.Option(False, "--json", help="Print what was removed as one JSON object."),
) -> None:
    from n8n_sizer.lab.netns import lab_down

    removal = lab_down(inventory)
    if json_out:
        print(json.dumps({"removed": removal.removed, "already_gone": removal.gone}, indent=2))
        return
    print(f"lab down: removed {len(removal.removed)} ({', '.join(removal.removed) or 'nothing'})")
    if removal.gone:
        print(f"already gone: {', '.join(removal.gone)}")
