"""`cost`, `teardown`, `reap`: the benchmark fleet's money and clean-up commands."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    app.command("cost", help=COST_HELP)(cost)
    app.command("teardown", help=TEARDOWN_HELP)(teardown)
    app.command("reap", help=REAP_HELP)(reap)


COST_HELP = """Estimate what a fleet stack costs: per host and total EUR for H hours, from the catalog.

Example: n8n-sizer cost --stack hetzner-sweep --hours 3 --warn-eur 1
"""

TEARDOWN_HELP = """Destroy a fleet stack with `pulumi destroy`, then delete anything the provider APIs still
list with the stack's labels and its owner's, and print what was found (0 expected). Needs HCLOUD_TOKEN
(Hetzner) or GOOGLE_OAUTH_ACCESS_TOKEN (GCP). Runs only in this project's folder (Pulumi.yaml named
n8n-sizer, stacks/Pulumi.<stack>.yaml present).

Example: n8n-sizer teardown --stack single --dry-run
"""

REAP_HELP = """Delete your fleet resources whose expires-at label has passed (all your stacks), on every
provider whose credentials are set. --dry-run lists them instead. --owner (or N8N_SIZER_OWNER) says whose;
--all-owners reaps every owner's.

Example: n8n-sizer reap --owner alice --dry-run
"""

STACKS_DIR_HELP = "Folder of the Pulumi.<stack>.yaml files."
OWNER_ENV = "N8N_SIZER_OWNER"


def cost(
    stack: str = typer.Option(..., "--stack", help="Stack name: reads stacks/Pulumi.<stack>.yaml."),
    hours: float | None = typer.Option(None, "--hours", help="Hours the fleet runs; default: the stack's ttl_hours."),
    warn_eur: float = typer.Option(5.0, "--warn-eur", help="Warn when the total is above this many EUR."),
    stacks_dir: Path = typer.Option(Path("stacks"), "--stacks-dir", help=STACKS_DIR_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print the result as one JSON object."),
) -> None:
    from n8n_sizer.fleet.cost import estimate_cost
    from n8n_sizer.fleet.spec import STACK_RE, stack_file
    from n8n_sizer.fleet.stackfile import load_stack_file
    from n8n_sizer.safety import numbers as n

    n.check_numbers({"--hours": (hours, n.HOURS), "--warn-eur": (warn_eur, n.EUR)})
    if not STACK_RE.fullmatch(stack):
        from n8n_sizer.errors import InputError

        raise InputError(
            f"--stack {stack!r} is not a fleet stack name (2-20 lowercase letters, digits, dashes); try --stack single"
        )
    spec = load_stack_file(stack_file(stack, stacks_dir))
    estimate = estimate_cost(spec, hours, warn_eur)
    _warn_placeholder(spec)
    if json_out:
        print(json.dumps(estimate.model_dump(mode="json")))
        return
    billed = f"{estimate.hours:g} h" + ("" if float(estimate.hours).is_integer() else " (billed as started hours)")
    print(f"stack {estimate.stack} ({estimate.provider}), {billed}:")
    print(f"  {'host':24} {'role':8} {'size':14} {'vCPU':>4} {'EUR/month':>10} {'EUR/h':>8} {'EUR':>8}")
    for h in estimate.hosts:
        mark = " *" if h.price_source == "estimate" else ""
        print(
            f"  {h.name:24} {h.role:8} {h.size:14} {h.vcpu:>4} {h.monthly_eur:>10.2f} {h.hourly_eur:>8.4f} "
            f"{h.total_eur:>8.2f}{mark}"
        )
    print(f"  total: {estimate.total_eur:.2f} EUR for {estimate.hours:g} h")
    if any(h.price_source == "estimate" for h in estimate.hosts):
        print("  * estimated list price (GCP), check it before you buy")
    if estimate.over_threshold:
        print(
            f"n8n-sizer: warning: {estimate.total_eur:.2f} EUR is above --warn-eur {estimate.warn_eur:g}; "
            "use fewer or smaller hosts, or fewer --hours",
            file=sys.stderr,
        )


def _warn_placeholder(spec) -> None:
    """The shipped stack files' operator_cidr is a documentation range (RFC 5737): fine for a price, refused
    by `pulumi up`; say so now, on stderr, so the user sets their own address before they need it."""
    from n8n_sizer.safety.network import check_ssh_cidr

    try:
        check_ssh_cidr(spec.operator_cidr, allow_wide=spec.allow_wide_ssh)
    except ValueError as exc:
        print(f"n8n-sizer: warning: {exc}; `pulumi up` refuses it", file=sys.stderr)


def teardown(
    stack: str = typer.Option(..., "--stack", help="Stack to destroy and sweep."),
    stacks_dir: Path = typer.Option(Path("stacks"), "--stacks-dir", help=STACKS_DIR_HELP),
    dry_run: bool = typer.Option(False, "--dry-run", help="List what would be destroyed and swept; change nothing."),
    all_owners: bool = typer.Option(
        False,
        "--all-owners",
        help="Sweep this stack's resources whoever owns them (default: only the stack file's n8n-sizer:owner).",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the result as one JSON object."),
) -> None:
    from n8n_sizer.fleet.reaper import (
        check_pulumi_project,
        format_report,
        report_json,
        run_pulumi_destroy,
        stack_owner,
        teardown_stack,
    )
    from n8n_sizer.fleet.spec import STACK_RE, stack_file
    from n8n_sizer.fleet.stackfile import load_stack_file

    if not STACK_RE.fullmatch(stack):
        from n8n_sizer.errors import InputError

        raise InputError(
            f"--stack {stack!r} is not a fleet stack name (2-20 lowercase letters, digits, dashes); try --stack single"
        )
    check_pulumi_project(stack, stacks_dir)  # before anything is destroyed or swept
    owner = None if all_owners else stack_owner(stack, stacks_dir)
    whose = "every owner's" if owner is None else f"owner {owner}'s"
    if dry_run:
        spec = load_stack_file(stack_file(stack, stacks_dir))
        if not json_out:  # --json prints one JSON object and nothing else
            print(
                f"dry run: would run `pulumi destroy --yes --stack {stack}` in {stacks_dir.resolve().parent}, "
                f"destroying {spec.provider} {spec.location}: " + ", ".join(f"{h.name} ({h.size})" for h in spec.hosts)
            )
            print(f"dry run: then sweep {whose} resources labelled project=n8n-sizer, stack={stack}:")
        report = teardown_stack(stack, stacks_dir=stacks_dir, owner=owner, dry_run=True)
        if json_out:
            print(
                json.dumps(
                    {
                        "dry_run": True,
                        "destroy": f"pulumi destroy --yes --stack {stack}",
                        "hosts": [h.name for h in spec.hosts],
                        "sweep": report_json(report),
                    }
                )
            )
            return
        for line in format_report(report):
            print(line)
        return
    destroyed = run_pulumi_destroy(stack, stacks_dir.resolve().parent)
    # Said before the sweep starts, so a sweep error cannot hide it.
    if not json_out or not destroyed.ok:
        print(
            destroyed.message if destroyed.ok else f"n8n-sizer: {destroyed.message}",
            file=sys.stdout if destroyed.ok else sys.stderr,
            flush=True,
        )
    report = teardown_stack(stack, stacks_dir=stacks_dir, destroy=lambda _stack, _dir: destroyed, owner=owner)
    if json_out:
        print(
            json.dumps(
                {
                    "dry_run": False,
                    "destroyed": destroyed.ok,
                    "destroy_message": destroyed.message,
                    "sweep": report_json(report),
                }
            )
        )
    else:
        for line in format_report(report):
            print(line)
    if report.found and not report.failed and destroyed.ok:
        print(
            f"n8n-sizer: warning: the sweep found {report.found} resource(s) pulumi left behind (0 expected); "
            "they are deleted now",
            file=sys.stderr,
        )
    if report.failed:
        print(
            f"n8n-sizer: {len(report.failed)} resource(s) could not be deleted; run teardown again, or "
            "delete them in the provider's console",
            file=sys.stderr,
        )
        raise typer.Exit(1)
    if not destroyed.ok:
        raise typer.Exit(2)


def reap(
    dry_run: bool = typer.Option(False, "--dry-run", help="List what would be deleted; delete nothing."),
    provider: str | None = typer.Option(
        None, "--provider", help="hetzner or gcp; default: every provider with credentials."
    ),
    gcp_project: str | None = typer.Option(None, "--gcp-project", help="GCP project id (default: GOOGLE_PROJECT)."),
    owner: str | None = typer.Option(
        None,
        "--owner",
        help="Reap only this owner's resources (the stacks' n8n-sizer:owner; default: N8N_SIZER_OWNER).",
    ),
    all_owners: bool = typer.Option(
        False, "--all-owners", help="Reap expired resources of every owner in the project."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the result as one JSON object."),
) -> None:
    import os

    from n8n_sizer.errors import InputError
    from n8n_sizer.fleet.reaper import format_report, open_sweepers, report_json
    from n8n_sizer.fleet.reaper import reap as reap_expired
    from n8n_sizer.fleet.spec import OWNER_RE

    if provider is not None and provider not in ("hetzner", "gcp"):
        raise InputError(f"--provider {provider!r} is unknown; try --provider hetzner or --provider gcp")
    owner = owner if owner is not None else os.environ.get(OWNER_ENV) or None
    if all_owners and owner is not None:
        raise InputError("--owner and --all-owners contradict each other; pass one")
    if not all_owners and owner is None:
        raise InputError(
            f"reap deletes only your own resources: pass --owner NAME (your stacks' n8n-sizer:owner), "
            f"export {OWNER_ENV}=NAME, or pass --all-owners to reap every owner's expired resources"
        )
    if owner is not None and not OWNER_RE.fullmatch(owner):
        raise InputError(
            f"--owner {owner!r} is not an owner label (lowercase letters, digits, '-', '_'); e.g. --owner alice"
        )
    sweepers = open_sweepers([provider] if provider else None, gcp_project)
    try:
        report = reap_expired(dry_run=dry_run, sweepers=sweepers, owner=owner)
    finally:
        for s in sweepers:
            s.close()
    if json_out:
        print(json.dumps({"dry_run": dry_run, **report_json(report)}))
    else:
        for line in format_report(report):
            print(line)
    if report.failed:
        print(f"n8n-sizer: {len(report.failed)} resource(s) could not be deleted; run reap again", file=sys.stderr)
        raise typer.Exit(1)
