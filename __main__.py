"""Pulumi program: stack config -> FleetSpec -> fleet components -> outputs. The work is in n8n_sizer.fleet."""

import pulumi

from n8n_sizer.errors import InputError
from n8n_sizer.fleet.program import build_fleet, fleet_spec_from_pulumi

try:
    fleet = build_fleet(fleet_spec_from_pulumi())
except InputError as exc:
    # RunError stops `pulumi up` with this one message and no Python traceback.
    raise pulumi.RunError(str(exc)) from None

pulumi.export("inventory", fleet.inventory)
pulumi.export("expires_at", fleet.expires_at)
if fleet.ssh_private_key is not None:
    pulumi.export("ssh_private_key", fleet.ssh_private_key)
