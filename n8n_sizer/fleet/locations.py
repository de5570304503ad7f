"""Where the fleet may run: fleet-specific data kept out of the advisor's catalog.

Hetzner locations and their network zones are the ones Hetzner's API lists (`GET /locations`). The
CX (shared Intel/AMD) and CAX (Ampere) sizes in the catalog are sold in the EU locations only; asking
for them elsewhere would fail late, at `pulumi up`, so the spec refuses it early.
GCP zones are not enumerated (there are too many and they change); the spec checks their shape.
"""

from __future__ import annotations

import re

HETZNER_LOCATIONS: dict[str, str] = {
    "fsn1": "eu-central",  # Falkenstein
    "nbg1": "eu-central",  # Nuremberg
    "hel1": "eu-central",  # Helsinki (seed 002 ran there)
    "ash": "us-east",  # Ashburn
    "hil": "us-west",  # Hillsboro
    "sin": "ap-southeast",  # Singapore
}
HETZNER_EU_ONLY_PREFIXES = ("cx", "cax")
GCP_ZONE_RE = re.compile(r"^[a-z]+-[a-z]+[0-9]+-[a-z]$")

# Images: Ubuntu 24.04 LTS on both providers. It runs cloud-init on first boot; on GCP, the
# ubuntu-os-cloud images read cloud-init user data from the `user-data` metadata key
# (Container-Optimized OS and Debian images do not run a full cloud-init).
HETZNER_IMAGE = "ubuntu-24.04"
GCP_IMAGE = "ubuntu-os-cloud/ubuntu-2404-lts-amd64"
HETZNER_SSH_USER = "root"  # Hetzner installs the project SSH key for root
# Hetzner image architectures are named like the catalog's arch (`x86`, `arm`).
GCP_SSH_USER = "n8n-sizer"  # created by the guest agent from the `ssh-keys` metadata entry, with sudo


def gcp_region(zone: str) -> str:
    """`europe-west3` for `europe-west3-a`."""
    return zone.rsplit("-", 1)[0]


# The load generator's boot: Docker for k6, the background package jobs off, a marker the bench waits for.
LOADGEN_READY_MARKER = "/var/lib/n8n-sizer-loadgen-ready"  # the bench driver waits for this file
# The load generator only needs Docker to run the pinned k6 image; the apt timers are off for the same
# reason as on targets (seed 004: an unattended package refresh made a 56 s request).
LOADGEN_CLOUD_INIT = f"""#cloud-config
package_update: true
packages: [docker.io]
runcmd:
  - [systemctl, disable, --now, apt-daily.timer, apt-daily-upgrade.timer, unattended-upgrades.service]
  - [sh, -c, "systemctl mask --now apt-news.service packagekit.service || true"]
  - [systemctl, enable, --now, docker]
  - [touch, {LOADGEN_READY_MARKER}]
"""
