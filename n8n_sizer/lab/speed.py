"""This machine's speed at this moment: CPU milliseconds a fixed JavaScript workload takes on the shared Node.js 24.

A cloud VM's vCPU is not one speed: the lab measured the same topology 9.0/s in one sitting and 13.6/s in another
(docs/findings/role-costs-measured.md), and the steal time /proc/stat counted was higher in the slower one. A CFS
quota is CPU time, so a slower core carries fewer executions in the same budget. `probe` runs a fixed workload of
the kind n8n spends its time on (objects built, JSON written and read back, strings compared) in a Node.js process
of its own, and reads the CPU time it took (`process.cpuUsage`, not the wall clock: time spent waiting for a core is
not speed). `benchmarks/lab_shape.py` probes before and after each topology, so predictions made from one sitting's
rows can be put at another sitting's speed (docs/lab.md).
"""

from __future__ import annotations

import json
import statistics
import subprocess
from pathlib import Path

from n8n_sizer.errors import InputError

# One round: 25,000 small execution-like items through JSON and back, keys sorted; about 0.1-0.3 s on this machine.
SPEED_JS = r"""
const rounds = Number(process.argv[1] || 7);
const ms = [];
let check = 0;
for (let r = 0; r < rounds; r++) {
  const before = process.cpuUsage();
  for (let i = 0; i < 25000; i++) {
    const item = { id: i, name: `item-${i}`, tags: ["a", "b", String(i % 7)], data: { x: i * 1.5, y: [i, i + 1, i + 2] } };
    const text = JSON.stringify({ json: item, pairedItem: { item: i }, copies: [item, item, item, item] });
    const back = JSON.parse(text);
    const keys = Object.keys(back.json).concat(Object.keys(back.json.data)).sort();
    check += keys.length + back.copies.length + text.length;
  }
  const used = process.cpuUsage(before);
  ms.push((used.user + used.system) / 1000);
}
process.stdout.write(JSON.stringify({ ms, check }));
"""


def probe(node_bin: Path, rounds: int = 7, timeout_s: float = 60.0) -> dict:
    """{'ms': median CPU ms of one round, 'rounds': each round's ms}; the first round (the JIT's warm-up) left out."""
    if rounds < 3:
        raise InputError(f"speed probe rounds {rounds}: give at least 3 (the first is the JIT's warm-up)")
    try:
        res = subprocess.run(
            [str(node_bin), "-e", SPEED_JS, str(rounds)], capture_output=True, text=True, timeout=timeout_s
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InputError(
            f"speed probe with {node_bin}: {exc}; install n8n's Node.js with `bash scripts/test.sh`"
        ) from None
    if res.returncode != 0:
        raise InputError(f"speed probe with {node_bin} failed: {res.stderr.strip()[-200:]}")
    got = json.loads(res.stdout)
    kept = got["ms"][1:]
    return {"ms": statistics.median(kept), "rounds": [round(v, 2) for v in kept]}
