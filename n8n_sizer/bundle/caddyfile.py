"""Read just enough of a Caddyfile to answer `check --topology`'s question: which upstreams serve a path,
and are they health-checked?

Caddy runs mutually exclusive `handle` blocks with the most specific path matcher first (longest path)
and a `handle` without a matcher last; that order is what `route_for` follows. Anything this reader does
not understand is left out, so a route it cannot see fails the rule rather than passing it.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from collections.abc import Callable

from n8n_sizer.safety.frozen import Frozen


class Route(Frozen):
    paths: tuple[str, ...]  # () = every path (a handle without a matcher, or a site-level reverse_proxy)
    upstreams: tuple[str, ...]
    health_uri: str | None


def _tokens(line: str) -> list[str]:
    line = re.sub(r"(^|\s)#.*$", "", line).strip()
    try:
        return shlex.split(line)
    except ValueError:
        return line.split()


def parse_routes(text: str) -> list[Route]:
    """Routes of the (first) site block: one per `handle` with a reverse_proxy, plus a bare reverse_proxy."""
    matchers: dict[str, tuple[str, ...]] = {}
    routes: list[Route] = []
    stack: list[str] = []  # what each open brace belongs to
    current: dict | None = None  # the handle being read
    proxy: dict | None = None  # the reverse_proxy being read
    for raw in text.splitlines():
        tokens = _tokens(raw)
        if not tokens:
            continue
        opens = tokens[-1] == "{"
        words = tokens[:-1] if opens else tokens
        if tokens == ["}"]:
            kind = stack.pop() if stack else ""
            if kind == "proxy" and proxy is not None:
                target = current if current is not None else {"paths": ()}
                routes.append(Route(paths=target["paths"], upstreams=tuple(proxy["up"]), health_uri=proxy["health"]))
                proxy = None
            elif kind == "handle":
                current = None
            continue
        head = words[0] if words else ""
        if head.startswith("@") and len(words) >= 3 and words[1] == "path":
            matchers[head] = tuple(words[2:])
        elif head == "handle" and opens:
            arg = words[1] if len(words) > 1 else None
            paths = matchers.get(arg, ()) if arg and arg.startswith("@") else ((arg,) if arg else ())
            if arg and arg.startswith("@") and arg not in matchers:
                paths = ("<unknown matcher>",)
            current = {"paths": paths}
            stack.append("handle")
            continue
        elif head == "reverse_proxy":
            ups = [w for w in words[1:] if not w.startswith(("@", "/"))]
            if opens:
                proxy = {"up": ups, "health": None}
                stack.append("proxy")
                continue
            target = current if current is not None else {"paths": ()}
            routes.append(Route(paths=target["paths"], upstreams=tuple(ups), health_uri=None))
        elif head == "health_uri" and proxy is not None and len(words) > 1:
            proxy["health"] = words[1]
        if opens:
            stack.append(head)
    return routes


def route_for(routes: list[Route], path: str) -> Route | None:
    """The route Caddy would pick for `path`: the longest matching path pattern, else the catch-all."""
    best: tuple[int, Route] | None = None
    for route in routes:
        for pattern in route.paths:
            if fnmatch.fnmatchcase(path, pattern) and (best is None or len(pattern) > best[0]):
                best = (len(pattern), route)
    if best is not None:
        return best[1]
    return next((r for r in routes if not r.paths), None)


RENDERED_SITE = ":5678 {"  # how `render --topology` opens the ingest site (render_topology.LB_PORT)


def rebind_caddyfile(
    rendered: str, *, site: str, bind: str, main: str, webhook: Callable[[int], str], admin: str
) -> str:
    """The rendered ingest Caddyfile with other addresses, its routing untouched: the site `site` bound to
    `bind`, `n8n-main:5678` -> `main`, `n8n-webhook-K:5678` -> `webhook(K)`, Caddy's admin API at `admin`
    ("off" for none). Raises InputError when the text is not such a Caddyfile or names another upstream."""
    from n8n_sizer.errors import InputError

    if not rendered.startswith(RENDERED_SITE):
        raise InputError(
            f"the ingest Caddyfile does not start with '{RENDERED_SITE}'; render it with `n8n-sizer render --topology`"
        )
    text = rendered.replace("n8n-main:5678", main)
    text = re.sub(r"n8n-webhook-(\d+):5678", lambda m: webhook(int(m.group(1))), text)
    if re.search(r"\bn8n-[a-z0-9-]+:\d+", text):
        raise InputError("the ingest Caddyfile names an upstream that is not running here; re-render it")
    return f"{{\n  admin {admin}\n}}\n{site} {{\n  bind {bind}" + text[len(RENDERED_SITE) :]
