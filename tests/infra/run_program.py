"""Run the Pulumi program (`__main__.py`) under Pulumi's mocks for stack files, in whatever venv runs this.

tests/infra/test_fresh_clone.py runs it with the python of a fresh virtualenv made by the README's steps, so
it imports nothing from the test suite but `mocks.py` beside it, and nothing from n8n_sizer itself: the
program does that. `--block MODULE` makes MODULE unimportable first (to see the program's message for it).

Usage: python tests/infra/run_program.py [--block MODULE] STACK_FILE...
Prints one line per stack, `ok <stack>: <n> resources, <m> servers` or `error <stack>: <Type>: <message>`;
exit 1 if any stack failed.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

SERVER_TYPES = ("hcloud:index/server:Server", "gcp:compute/instance:Instance")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--block"]:
        sys.modules[argv[1]] = None  # `import MODULE` now raises ModuleNotFoundError naming it
        argv = argv[2:]
    warnings.simplefilter("ignore", DeprecationWarning)  # pulumi_gcp warns on import
    import yaml  # a core dependency of n8n-sizer
    from mocks import run_main

    status = 0
    for path in map(Path, argv):
        stack = path.name[len("Pulumi.") : -len(".yaml")]
        config = yaml.safe_load(path.read_text(encoding="utf-8"))["config"]
        try:
            mocks, _ = run_main(stack, config)
        except Exception as exc:  # the program's own message is what the test looks at
            print(f"error {stack}: {type(exc).__name__}: {exc}")
            status = 1
            continue
        servers = [r for r in mocks.resources if r.typ in SERVER_TYPES]
        print(f"ok {stack}: {len(mocks.resources)} resources, {len(servers)} servers")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
