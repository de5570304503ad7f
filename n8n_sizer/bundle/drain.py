"""Draining a webhook processor out of the load balancer before it stops (issue 28): one source for the hook
n8n loads, the health path Caddy polls and the waits, used by the cluster render and the lab alike.

Caddy checks each webhook processor every `HEALTH_INTERVAL_S` at `DRAIN_HEALTH_URI`; on SIGTERM the hook
(templates/n8n-drain-hook.js) makes that path answer 503 at once and hands the signal to n8n's own graceful
shutdown `DRAIN_S` later. The hook answers 503 at once, so Caddy's next check (within one interval) takes the
processor out of rotation; the wait is two intervals plus the time a request Caddy had just sent takes to arrive,
so by then nothing new comes and n8n finishes only what it holds.

`rule_webhook_drain` is `check --topology`'s rule for the same three things (bundle/checks/all_hosts.py lists it).
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

from n8n_sizer.bundle.caddyfile import parse_routes, route_for
from n8n_sizer.bundle.checks.rule import RuleResult, fail, na, ok

DRAIN_HEALTH_URI = "/healthz/drain"
HEALTH_INTERVAL_S = 2  # Caddy's health_interval for every upstream
HEALTH_TIMEOUT_S = 5  # Caddy's health_timeout
IN_FLIGHT_S = 2  # a request Caddy dispatched just before the check failed reaches n8n within this
DRAIN_S = 2 * HEALTH_INTERVAL_S + IN_FLIGHT_S
HOOK_TEMPLATE = Path(__file__).resolve().parent.parent / "templates" / "n8n-drain-hook.js"
COMPOSE_HOOK_PATH = "/etc/n8n-sizer/drain-hook.js"  # where the rendered compose mounts it in the container


def drain_hook_source() -> str:
    """The hook's text, as package data (the rendered compose mounts it; native processes load HOOK_TEMPLATE)."""
    return resources.files("n8n_sizer").joinpath("templates/n8n-drain-hook.js").read_text(encoding="utf-8")


def drain_env(hook_path: str) -> dict[str, str]:
    """The two variables a webhook processor needs to drain: n8n loads the hook, the hook reads the wait."""
    return {"EXTERNAL_HOOK_FILES": hook_path, "SIZER_DRAIN_S": str(DRAIN_S)}


def worker_drain_env(hook_path: str) -> dict[str, str]:
    """A worker loads the same hook: on SIGTERM it finishes every job Bull handed it, then n8n stops (its
    `worker.ready` part; it waits at most 10 s, less when 0.8 x N8N_GRACEFUL_SHUTDOWN_TIMEOUT is shorter)."""
    return {"EXTERNAL_HOOK_FILES": hook_path}


def webhook_stop_grace_s(stop_grace_s: int) -> int:
    """A webhook processor's stop grace: the drain wait before n8n sees SIGTERM, then n8n's own stop grace."""
    return DRAIN_S + stop_grace_s


def drain_context(stop_grace_s: int) -> dict:
    """What the cluster template needs to render the hook, its mount and the load balancer's checks."""
    return {
        "uri": DRAIN_HEALTH_URI,
        "interval_s": HEALTH_INTERVAL_S,
        "timeout_s": HEALTH_TIMEOUT_S,
        "wait_s": DRAIN_S,
        "hook": drain_hook_source(),
        "hook_path": COMPOSE_HOOK_PATH,
        "webhook_stop_grace_s": webhook_stop_grace_s(stop_grace_s),
    }


HOOK_MARK = "n8n-sizer drain"  # a line the hook logs, so its rendered text is recognised in `configs:`
INTERVAL_RE = re.compile(r"health_interval\s+(\d+(?:\.\d+)?)s")


class ClusterView(Protocol):
    """What the rule reads of `rules_cluster.Cluster`: (host, service) pairs by role."""

    def services(self, *roles: str) -> list[tuple[Any, Any]]: ...


def _processor_problems(c: ClusterView) -> list[str]:
    problems: list[str] = []
    for h, s in c.services("webhook"):
        where, hook, drain = f"{h.name}/{s.name}", s.env.get("EXTERNAL_HOOK_FILES"), s.env.get("SIZER_DRAIN_S", "")
        if not hook or not drain.isdigit():
            problems.append(f"{where} loads no drain hook (EXTERNAL_HOOK_FILES, SIZER_DRAIN_S)")
            continue
        mounted = any(HOOK_MARK in t for t in h.compose.config_texts) or hook in [t for _, t in s.volumes]
        if not mounted:
            problems.append(f"{where}'s drain hook {hook} is neither a rendered config nor a volume")
        n8n_s = s.env.get("N8N_GRACEFUL_SHUTDOWN_TIMEOUT", "")
        if not n8n_s.isdigit() or s.stop_grace_s is None or s.stop_grace_s <= int(drain) + int(n8n_s):
            problems.append(
                f"{where}'s stop_grace_period ({s.stop_grace_s} s) is not above the drain wait ({drain} s) plus "
                f"N8N_GRACEFUL_SHUTDOWN_TIMEOUT ({n8n_s or 'unset'} s)"
            )
        for text in (t for lb_host, _ in c.services("proxy") for t in lb_host.compose.config_texts):
            slow = [float(i) for i in INTERVAL_RE.findall(text) if 2 * float(i) > int(drain)]
            if slow:
                problems.append(f"the load balancer checks every {slow[0]:g} s: two checks outlast {where}'s drain")
    return problems


def rule_webhook_drain(c: ClusterView) -> RuleResult:
    processors, proxies = c.services("webhook"), c.services("proxy")
    if not processors or len(proxies) != 1:
        return na("webhook-drain", "no webhook processors behind one load balancer (webhook-routes says more)")
    problems = _processor_problems(c)
    lb_host, lb = proxies[0]
    route = route_for([r for t in lb_host.compose.config_texts for r in parse_routes(t)], "/webhook/x")
    if route is not None and route.health_uri != DRAIN_HEALTH_URI:
        problems.append(f"{lb_host.name}/{lb.name} checks the webhook processors at {route.health_uri}")
    if problems:
        return fail(
            "webhook-drain",
            "; ".join(problems),
            f"check the webhook processors at health_uri {DRAIN_HEALTH_URI} (served by the drain hook each "
            "loads through EXTERNAL_HOOK_FILES) and give each a stop_grace_period above its drain wait plus its "
            "N8N_GRACEFUL_SHUTDOWN_TIMEOUT (render --topology writes all three; docs/cluster.md#stopping-a-process-draining)",
        )
    return ok(
        "webhook-drain",
        f"{len(processors)} webhook processors fail {DRAIN_HEALTH_URI} on SIGTERM and stop only after the load "
        "balancer has seen it",
    )


def rule_worker_drain(c: ClusterView) -> RuleResult:
    """Every worker loads the hook (rendered or mounted) and starts its worker server, whose `worker.ready` arms
    it: without it n8n may stop the task runner under a job it has not yet counted (docs/cluster.md)."""
    workers = c.services("worker")
    if not workers:
        return na("worker-drain", "no workers")
    problems: list[str] = []
    for h, s in workers:
        where, hook = f"{h.name}/{s.name}", s.env.get("EXTERNAL_HOOK_FILES")
        if not hook:
            problems.append(f"{where} loads no drain hook (EXTERNAL_HOOK_FILES)")
        elif not (any(HOOK_MARK in t for t in h.compose.config_texts) or hook in [t for _, t in s.volumes]):
            problems.append(f"{where}'s drain hook {hook} is neither a rendered config nor a volume")
        if s.env.get("QUEUE_HEALTH_CHECK_ACTIVE") != "true":
            problems.append(f"{where} starts no worker server (QUEUE_HEALTH_CHECK_ACTIVE), so the hook is never armed")
    if problems:
        return fail(
            "worker-drain",
            "; ".join(problems),
            "load the drain hook in every worker through EXTERNAL_HOOK_FILES with QUEUE_HEALTH_CHECK_ACTIVE=true "
            "(render --topology writes both; docs/cluster.md#stopping-a-process-draining)",
        )
    return ok("worker-drain", f"{len(workers)} workers finish every job Bull handed them before n8n stops")
