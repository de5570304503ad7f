"""Pulumi program: stack config -> FleetSpec -> fleet components -> outputs. The work is in n8n_sizer.fleet."""

import pulumi


def _missing_install(exc: ModuleNotFoundError) -> pulumi.RunError:
    """Pulumi runs this in the .venv that Pulumi.yaml names: say which install step is missing, in one line."""
    missing = (exc.name or "").split(".")[0]
    if missing == "n8n_sizer":
        return pulumi.RunError(
            "the Pulumi program needs n8n_sizer in .venv: run the README's first command "
            "(python3 -m venv .venv && .venv/bin/pip install -q .), then "
            ".venv/bin/pip install -q '.[fleet]'"
        )
    if missing.startswith("pulumi_"):
        return pulumi.RunError(
            f"the Pulumi program needs the fleet extra ({missing} is not installed): .venv/bin/pip install '.[fleet]'"
        )
    raise exc


try:
    from n8n_sizer.errors import InputError
    from n8n_sizer.fleet.program import build_fleet, fleet_spec_from_pulumi
except ModuleNotFoundError as exc:
    raise _missing_install(exc) from None

try:
    fleet = build_fleet(fleet_spec_from_pulumi())
except InputError as exc:
    # RunError stops `pulumi up` with this one message and no Python traceback.
    raise pulumi.RunError(str(exc)) from None
except ModuleNotFoundError as exc:
    raise _missing_install(exc) from None

pulumi.export("inventory", fleet.inventory)
pulumi.export("expires_at", fleet.expires_at)
if fleet.ssh_private_key is not None:
    pulumi.export("ssh_private_key", fleet.ssh_private_key)
