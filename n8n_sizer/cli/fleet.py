"""`cost`, `teardown`, `reap`: the benchmark fleet's money and clean-up commands."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    app.command("cost", help=COST_HELP)(cost)
    app.command("teardown", help=TEARDOWN_HELP)(teardown)
    app.command("reap", help=REAP_HELP)(reap)


COST_HELP = """Estimate what a fleet stack costs: per host and total EUR for H hours, from the catalog.

Example: n8n-sizer cost --stack hetzner-sweep --hours 3 --warn-eur 1
"""

TEARDOWN_HELP = """Destroy a fleet stack with `pulumi destroy`, then delete anything the provider APIs still
list with the stack's labels, and print what was found (0 expected). Needs HCLOUD_TOKEN (Hetzner) or
GOOGLE_OAUTH_ACCESS_TOKEN (GCP).

Example: n8n-sizer teardown --stack single
"""

REAP_HELP = """Delete every fleet resource whose expires-at label has passed (all stacks), on every provider
whose credentials are set. --dry-run lists them instead.

Example: n8n-sizer reap --dry-run
"""

STACKS_DIR_HELP = "Folder of the Pulumi.<stack>.yaml files."


def cost(
    stack: str = typer.Option(..., "--stack", help="Stack name: reads stacks/Pulumi.<stack>.yaml."),
    hours: Optional[float] = typer.Option(None, "--hours", help="Hours the fleet runs; default: the stack's ttl_hours."),
    warn_eur: float = typer.Option(5.0, "--warn-eur", help="Warn when the total is above this many EUR."),
    stacks_dir: Path = typer.Option(Path("stacks"), "--stacks-dir", help=STACKS_DIR_HELP),
) -> None:
    from n8n_sizer.fleet.cost import estimate_cost
    from n8n_sizer.fleet.spec import stack_file
    from n8n_sizer.fleet.stackfile import load_stack_file

    estimate = estimate_cost(load_stack_file(stack_file(stack, stacks_dir)), hours, warn_eur)
    billed = f"{estimate.hours:g} h" + ("" if float(estimate.hours).is_integer() else " (billed as started hours)")
    print(f"stack {estimate.stack} ({estimate.provider}), {billed}:")
    print(f"  {'host':24} {'role':8} {'size':14} {'vCPU':>4} {'EUR/month':>10} {'EUR/h':>8} {'EUR':>8}")
    for h in estimate.hosts:
        mark = " *" if h.price_source == "estimate" else ""
        print(f"  {h.name:24} {h.role:8} {h.size:14} {h.vcpu:>4} {h.monthly_eur:>10.2f} {h.hourly_eur:>8.4f} "
              f"{h.total_eur:>8.2f}{mark}")
    print(f"  total: {estimate.total_eur:.2f} EUR for {estimate.hours:g} h")
    if any(h.price_source == "estimate" for h in estimate.hosts):
        print("  * estimated list price (GCP), check it before you buy")
    if estimate.over_threshold:
        print(f"n8n-sizer: warning: {estimate.total_eur:.2f} EUR is above --warn-eur {estimate.warn_eur:g}; "
              "use fewer or smaller hosts, or fewer --hours", file=sys.stderr)


def teardown(
    stack: str = typer.Option(..., "--stack", help="Stack to destroy and sweep."),
    stacks_dir: Path = typer.Option(Path("stacks"), "--stacks-dir", help=STACKS_DIR_HELP),
) -> None:
    from n8n_sizer.fleet.reaper import format_report, run_pulumi_destroy, teardown_stack
    from n8n_sizer.fleet.spec import STACK_RE

    if not STACK_RE.match(stack):
        from n8n_sizer.errors import InputError

        raise InputError(f"--stack {stack!r} is not a fleet stack name (2-20 lowercase letters, digits, dashes); "
                         "try --stack single")
    destroyed = run_pulumi_destroy(stack, stacks_dir.resolve().parent)
    # Said before the sweep starts, so a sweep error cannot hide it.
    print(destroyed.message if destroyed.ok else f"n8n-sizer: {destroyed.message}",
          file=sys.stdout if destroyed.ok else sys.stderr, flush=True)
    report = teardown_stack(stack, stacks_dir=stacks_dir, destroy=lambda _stack, _dir: destroyed)
    for line in format_report(report):
        print(line)
    if report.found and not report.failed and destroyed.ok:
        print(f"n8n-sizer: warning: the sweep found {report.found} resource(s) pulumi left behind (0 expected); "
              "they are deleted now", file=sys.stderr)
    if report.failed:
        print(f"n8n-sizer: {len(report.failed)} resource(s) could not be deleted; run teardown again, or "
              "delete them in the provider's console", file=sys.stderr)
        raise typer.Exit(1)
    if not destroyed.ok:
        raise typer.Exit(2)


def reap(
    dry_run: bool = typer.Option(False, "--dry-run", help="List what would be deleted; delete nothing."),
    provider: Optional[str] = typer.Option(None, "--provider", help="hetzner or gcp; default: every provider with credentials."),
    gcp_project: Optional[str] = typer.Option(None, "--gcp-project", help="GCP project id (default: GOOGLE_PROJECT)."),
) -> None:
    from n8n_sizer.errors import InputError
    from n8n_sizer.fleet.reaper import format_report, open_sweepers
    from n8n_sizer.fleet.reaper import reap as reap_expired

    if provider is not None and provider not in ("hetzner", "gcp"):
        raise InputError(f"--provider {provider!r} is unknown; try --provider hetzner or --provider gcp")
    sweepers = open_sweepers([provider] if provider else None, gcp_project)
    try:
        report = reap_expired(dry_run=dry_run, sweepers=sweepers)
    finally:
        for s in sweepers:
            s.close()
    for line in format_report(report):
        print(line)
    if report.failed:
        print(f"n8n-sizer: {len(report.failed)} resource(s) could not be deleted; run reap again",
              file=sys.stderr)
        raise typer.Exit(1)
