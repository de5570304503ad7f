"""Write n8n_sizer/data/node_families.json: every node type n8n ships, sorted into its family.

Reads n8n's own node lists from the installed n8n (n8n-nodes-base and @n8n/n8n-nodes-langchain,
`dist/types/nodes.json`: each node's name, group, credentials, codex categories, polling and webhooks) and sorts each
with `advisor.workflow_price.families.classify_description`; a node n8n marks `usableAsTool` also gets its AI-tool
variant (`<type>Tool`, which n8n generates at run time). Run after installing n8n (`n8n_sizer/native/install.py`):

    PYTHONPATH=. .venv/bin/python benchmarks/node_families.py [--out n8n_sizer/data/node_families.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

from n8n_sizer.advisor.workflow_price.families import AI, BASE, classify_description, tool_variant_family
from n8n_sizer.native.install import install_n8n
from n8n_sizer.safety.write import write_atomic
from n8n_sizer.versions import N8N_VERSION

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "n8n_sizer" / "data" / "node_families.json"
PACKAGES = ((BASE, "n8n-nodes-base"), (AI, "@n8n/n8n-nodes-langchain"))


def families_from(modules: Path) -> dict[str, str]:
    types: dict[str, str] = {}
    for prefix, package in PACKAGES:
        described = json.loads((modules / package / "dist" / "types" / "nodes.json").read_text())
        for desc in described:
            node_type = prefix + desc["name"]
            family = classify_description(desc, prefix)
            types.setdefault(node_type, family)
            if desc.get("usableAsTool") and not family.startswith("trigger"):
                types.setdefault(node_type + "Tool", tool_variant_family(family))
    return dict(sorted(types.items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()
    install = install_n8n(quiet=True)
    modules = install.n8n_bin.parents[2]  # <install>/node_modules/n8n/bin/n8n
    types = families_from(modules)
    doc = {
        "about": {
            "what": "each node type n8n ships, sorted into its family by "
            "advisor/workflow_price/families.py:classify_description, written by benchmarks/node_families.py",
            "source": f"n8n {N8N_VERSION}: n8n-nodes-base and @n8n/n8n-nodes-langchain dist/types/nodes.json "
            "(name, group, credentials, codex, polling, webhooks, usableAsTool)",
            "counts": dict(collections.Counter(types.values()).most_common()),
        },
        "types": types,
    }
    write_atomic(args.out, json.dumps(doc, indent=0) + "\n", private=False)
    print(f"wrote {len(types)} node types to {args.out}: {doc['about']['counts']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
