"""One Postgres arithmetic: connections, max_connections and what a host's RAM carries are computed in
advisor/pools.py only; advisor, render and check call it (a second formula fails this test)."""

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "n8n_sizer"
HOME = {"advisor/pools.py", "advisor/setup.py"}  # setup.py defines the constants pools.py computes with
NAMES = {
    "CONNECTION_HEADROOM",
    "POSTGRES_DEFAULT_MAX_CONNECTIONS",
    "SHARED_BUFFERS_FRACTION",
    "MIN_WORK_MEM_MIB",
    "RAM_PER_CONNECTION_MIB",
    "POSTGRES_BACKEND_RAM_SHARE",
}


def _name(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def test_no_module_but_pools_computes_with_the_postgres_constants():
    found = []
    for path in PACKAGE.rglob("*.py"):
        rel = str(path.relative_to(PACKAGE))
        if rel in HOME or "__pycache__" in rel:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            operands = (
                [node.left, node.right]
                if isinstance(node, ast.BinOp)
                else [*node.args]
                if isinstance(node, ast.Call) and _name(node.func) in ("max", "min")
                else []
            )
            for op in operands:
                if _name(op) in NAMES:
                    found.append(f"{rel}:{node.lineno} {_name(op)}")
    assert not found, f"Postgres arithmetic outside advisor/pools.py: {found}"


def test_no_module_but_pools_adds_main_s_extra_connection_or_writes_the_formula():
    """Main's one connection over its pool (seed 000) is `pools.MAIN_EXTRA_CONNECTIONS`, and the formula's text is
    `pools.pool_terms`: a `pool ... + 1` or a `(pool ... + 1)` string anywhere else is a second source."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        rel = str(path.relative_to(PACKAGE))
        if rel in HOME or "__pycache__" in rel:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
                sides = (node.left, node.right)
                if any(isinstance(x, ast.Constant) and x.value == 1 for x in sides) and any(
                    "pool" in ast.unparse(x).lower() for x in sides
                ):
                    found.append(f"{rel}:{node.lineno} {ast.unparse(node)[:60]}")
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and re.search(r"pool \S+ \+ 1\)", node.value)
            ):
                found.append(f"{rel}:{node.lineno} {node.value[:60]!r}")
    assert not found, f"main's pool + 1 outside advisor/pools.py: {found}"


def test_the_formula_s_text_adds_up_to_its_connections():
    from n8n_sizer.advisor import pools

    need, text = pools.pool_terms([("main", 3), ("webhook", 2), ("webhook", 2), ("worker", 5)])
    assert need == (3 + 1) + 2 * 2 + 5 and text == "(main pool 3 + 1) + 2 webhook x pool 2 + 1 worker x pool 5"
    assert pools.pool_arithmetic([("main", 2), ("worker", 2)]).endswith(
        f"+ {pools.CONNECTION_HEADROOM} headroom = {pools.required_max_connections(2 + 1 + 2)}"
    )


def test_advisor_render_and_check_agree_on_max_connections():
    from n8n_sizer.advisor import pools
    from n8n_sizer.advisor.pools import setup_recommended_max_connections as recommended_max_connections
    from n8n_sizer.advisor.setup import Setup
    from n8n_sizer.bundle.topology import max_connections, parse_topology

    setup = Setup(mode="queue", workers=16, concurrency=20, db_pool_size=11)
    conns = pools.setup_connections(setup)
    assert recommended_max_connections(setup) == pools.recommended_max_connections(conns)
    t = parse_topology(
        {
            "topology": [
                {"name": "data", "provider": "hetzner", "size": "cx43", "roles": {"postgres": 1, "redis": 1}},
                {"name": "app", "provider": "hetzner", "size": "cx33", "roles": {"main": 1}},
                {"name": "worker", "provider": "hetzner", "size": "cx33", "count": 8, "roles": {"workers": 2}},
            ],
            "db_pool_size": 11,
        }
    )
    assert max_connections(t) == pools.recommended_max_connections((11 + 1) + 16 * 11)
