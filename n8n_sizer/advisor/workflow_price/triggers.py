"""What starts a workflow's executions, and at what rate its parameters imply.

Webhook, Form, Chat and MCP triggers, and an app's webhook trigger, start an execution per request: their rate is
the one the user gives (`--rps`). A Schedule, Cron or Interval trigger, and an app's polling trigger, start them at a
rate their rules say: n8n 2.41.1's own parameters and defaults (n8n-nodes-base ScheduleTrigger.node.js: `rule.
interval[]` with `field` seconds (every `secondsInterval`, default 30), minutes (5), hours (1), days (1), weeks (1,
at each of `triggerAtDay`, default [0]), months (1) or cronExpression; Cron.node.js and the polling triggers:
`triggerTimes.item[]` / `pollTimes.item[]` with `mode` everyMinute, everyHour, everyDay, everyWeek, everyMonth,
everyX (`value` `unit`) or custom (`cronExpression`), n8n-workflow cron.ts; Interval.node.js: `interval` (1) x
`unit` (seconds)). A poll is an execution only when it finds something new: its rate is an upper bound.
Manual, sub-workflow, error and event triggers say nothing of a rate.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from n8n_sizer.advisor.workflow_price.export import ExportNode, printable
from n8n_sizer.advisor.workflow_price.families import Family, family_of
from n8n_sizer.safety.frozen import Frozen

# The kinds that start an execution per HTTP request: the rate is the one given.
WEBHOOK_KINDS = ("webhook", "form", "chat", "mcp", "app-webhook")
TIMED_KINDS = ("schedule", "poll")
UNIT_S = {"seconds": 1.0, "minutes": 60.0, "hours": 3600.0, "days": 86400.0, "weeks": 604800.0, "months": 2629800.0}
DISGUISE = {
    "form": "a Form trigger is a webhook: n8n serves the form, and each submission is a POST that starts an execution",
    "chat": "a Chat trigger is a webhook: n8n serves the chat, and each message is a POST that starts an execution",
    "mcp": "an MCP server trigger is a webhook: each tool call of an MCP client is a request that starts an execution",
    "app-webhook": "an app trigger is a webhook: the app sends a request per event, each starts an execution",
}


class Trigger(Frozen):
    name: str
    type: str
    kind: str  # webhook, form, chat, mcp, app-webhook, schedule, poll, manual, subworkflow, error, event, none
    rate_per_s: float | None = None  # what the parameters imply (schedule, poll); None: not in the export
    says: str = ""  # the rule in words, e.g. "every 5 minutes"

    @property
    def webhook_like(self) -> bool:
        return self.kind in WEBHOOK_KINDS


def _number(value: Any, default: float) -> float | None:
    """A positive finite number parameter, its default when absent, None for an expression or anything odd."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def _every(seconds: float) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = seconds / size
            return f"every {n:g} {unit}{'s' if n != 1 else ''}"
    return f"every {seconds:g} second{'s' if seconds != 1 else ''}"


# --- cron ------------------------------------------------------------------------------------------

_NAMES = {
    3: {m: i for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), 1)},
    4: {d: i for i, d in enumerate("sun mon tue wed thu fri sat".split())},
}
_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))  # minute hour day-of-month month day-of-week


def _field(text: str, low: int, high: int, names: dict[str, int] | None) -> set[int] | None:
    out: set[int] = set()
    for part in text.lower().split(","):
        step = 1
        if "/" in part:
            part, _, step_text = part.partition("/")
            if not step_text.isdigit() or int(step_text) == 0:
                return None
            step = int(step_text)
        if part in ("*", "?", ""):
            a, b = low, high
        elif "-" in part:
            left, _, right = part.partition("-")
            a, b = _value(left, names), _value(right, names)
            if a is None or b is None:
                return None
        else:
            a = _value(part, names)
            if a is None:
                return None
            b = high if step > 1 else a
        if not (low <= a <= high and low <= b <= high) or a > b:
            return None
        out.update(range(a, b + 1, step))
    return out or None


def _value(text: str, names: dict[str, int] | None) -> int | None:
    if text.isdigit() and len(text) <= 4:
        return int(text)
    return (names or {}).get(text[:3]) if text else None


def cron_rate(expression: str) -> float | None:
    """Fires per second of a 5-field (minute first) or 6-field (second first) cron expression, averaged over four
    years; None when it is not one."""
    fields = expression.split()
    if len(fields) not in (5, 6) or len(expression) > 200:
        return None
    seconds = 1
    if len(fields) == 6:
        sec = _field(fields[0], 0, 59, None)
        if sec is None:
            return None
        seconds, fields = len(sec), fields[1:]
    sets = [_field(f, lo, hi, _NAMES.get(i)) for i, (f, (lo, hi)) in enumerate(zip(fields, _RANGES, strict=True))]
    if any(s is None for s in sets):
        return None
    minutes, hours, dom, months, dow = sets
    dow = {d % 7 for d in dow}
    dom_any, dow_any = fields[2] in ("*", "?"), fields[4] in ("*", "?")
    start, days = dt.date(2024, 1, 1), 1461
    matching = 0
    for i in range(days):
        day = start + dt.timedelta(days=i)
        if day.month not in months:
            continue
        by_dom, by_dow = day.day in dom, (day.isoweekday() % 7) in dow
        # cron's rule: with both day fields restricted, either matches; with one a wildcard, the other decides
        hit = (by_dom or by_dow) if not (dom_any or dow_any) else (by_dom and by_dow)
        matching += hit
    return seconds * len(minutes) * len(hours) * matching / (days * 86400.0)


def _times_rate(item: Any) -> tuple[float | None, str]:
    """One `triggerTimes`/`pollTimes` item (Cron node, polling triggers): fires per second and in words."""
    if not isinstance(item, dict):
        return None, "a time rule that is not an object"
    mode = item.get("mode", "everyDay")
    fixed = {"everyMinute": 60.0, "everyHour": 3600.0, "everyDay": 86400.0, "everyWeek": 604800.0}
    if mode in fixed:
        return 1.0 / fixed[mode], _every(fixed[mode])
    if mode == "everyMonth":
        return 1.0 / UNIT_S["months"], "every month"
    if mode == "everyX":
        value = _number(item.get("value"), 2.0)
        unit = item.get("unit", "hours")
        if value is None or unit not in ("minutes", "hours"):
            return None, "every X (an expression or an odd value)"
        return 1.0 / (value * UNIT_S[unit]), _every(value * UNIT_S[unit])
    if mode == "custom":
        expr = item.get("cronExpression")
        rate = cron_rate(expr) if isinstance(expr, str) else None
        return rate, f"cron {printable(str(expr), 40)!r}"
    return None, f"mode {printable(str(mode), 30)!r}"


def _schedule_rule(rule: Any) -> tuple[float | None, str]:
    """One `rule.interval[]` entry of the Schedule trigger."""
    if not isinstance(rule, dict):
        return None, "a rule that is not an object"
    field = rule.get("field", "days")
    if field == "cronExpression":
        expr = rule.get("expression")
        rate = cron_rate(expr) if isinstance(expr, str) else None
        return rate, f"cron {printable(str(expr), 40)!r}"
    defaults = {"seconds": 30, "minutes": 5, "hours": 1, "days": 1, "weeks": 1, "months": 1}
    if field not in defaults:
        return None, f"field {printable(str(field), 30)!r}"
    every = _number(rule.get(f"{field}Interval"), defaults[field])
    if every is None:
        return None, f"every ? {field} (an expression)"
    period = every * UNIT_S[field]
    if field == "weeks":
        days = rule.get("triggerAtDay", [0])
        count = len(days) if isinstance(days, list) and days else 1
        return count / period, f"{count} day(s) {_every(period)}"
    return 1.0 / period, _every(period)


def _rules_rate(rules: list[tuple[float | None, str]]) -> tuple[float | None, str]:
    if not rules:
        return None, "no rule"
    known = [r for r, _ in rules if r is not None]
    words = "; ".join(w for _, w in rules[:4]) + (" ..." if len(rules) > 4 else "")
    if len(known) < len(rules):
        return None, words
    return sum(known), words


def timed_rate(node: ExportNode, kind: str) -> tuple[float | None, str]:
    """(fires per second, the rule in words) of a schedule or polling trigger node."""
    short = node.type.rsplit(".", 1)[-1]
    p = node.parameters
    if short == "interval":
        value, unit = _number(p.get("interval"), 1.0), p.get("unit", "seconds")
        if value is None or unit not in ("seconds", "minutes", "hours"):
            return None, "every ? (an expression or an odd value)"
        return 1.0 / (value * UNIT_S[unit]), _every(value * UNIT_S[unit])
    if short == "scheduleTrigger":
        rule = p.get("rule", {"interval": [{"field": "days"}]})
        items = rule.get("interval") if isinstance(rule, dict) else None
        if not isinstance(items, list):
            return None, "a rule n8n-sizer does not read"
        return _rules_rate([_schedule_rule(r) for r in items[:50]])
    key = "triggerTimes" if short == "cron" else "pollTimes"
    default = {} if short == "cron" else {"item": [{"mode": "everyMinute"}]}
    times = p.get(key, default)
    items = times.get("item") if isinstance(times, dict) else None
    if items is None and short == "cron":
        return None, "no trigger time set"
    if not isinstance(items, list):
        return None, "a time rule n8n-sizer does not read"
    return _rules_rate([_times_rate(i) for i in items[:50]])


def trigger_of(node: ExportNode, family: Family) -> Trigger:
    kind = family.runs
    rate, says = (None, "")
    if kind in TIMED_KINDS:
        rate, says = timed_rate(node, kind)
    return Trigger(name=node.name, type=node.type, kind=kind, rate_per_s=rate, says=says)


def triggers_in(nodes: tuple[ExportNode, ...] | list[ExportNode]) -> list[Trigger]:
    """Every enabled trigger node of the export, in its order."""
    out = []
    for node in nodes:
        family = family_of(node.type)
        if node.disabled or family is None or family.role != "trigger":
            continue
        out.append(trigger_of(node, family))
    return out


PRIORITY = (
    "webhook",
    "form",
    "chat",
    "mcp",
    "app-webhook",
    "schedule",
    "poll",
    "event",
    "manual",
    "subworkflow",
    "error",
)


def sized_trigger(triggers: list[Trigger]) -> Trigger | None:
    """The trigger an answer sizes for: a webhook-like one first (a request per execution), then timed ones (the
    most frequent), then the rest."""
    if not triggers:
        return None
    return min(
        triggers,
        key=lambda t: (PRIORITY.index(t.kind) if t.kind in PRIORITY else len(PRIORITY), -(t.rate_per_s or 0.0)),
    )


def describe(trigger: Trigger | None, rps: float | None) -> str:
    """What the answer says of the trigger and the rate it was sized for."""
    if trigger is None:
        return "no trigger node: priced as if a Webhook started it"
    what = f"trigger {trigger.name!r} ({trigger.type.rsplit('.', 1)[-1]})"
    asked = f"--rps {rps:g}" if rps is not None else "no --rps"
    if trigger.kind == "webhook":
        return f"{what}: a webhook, sized for {asked}"
    if trigger.kind in DISGUISE:
        return f"{what}: {DISGUISE[trigger.kind]}; sized for {asked}"
    if trigger.kind in TIMED_KINDS:
        noun = "scheduled" if trigger.kind == "schedule" else "polled (an execution only when a poll finds something)"
        if trigger.rate_per_s is None:
            return f"{what}: {noun} ({trigger.says}), not started by a webhook; its rate is not in the export, sized for {asked}"
        implied = f"{trigger.rate_per_s:.3g}/s ({trigger.says})"
        if rps is None:
            return f"{what}: {noun}, not started by a webhook: {implied}; sized for that rate"
        ratio = rps / trigger.rate_per_s
        gap = f"{ratio:,.0f}x" if ratio >= 10 else f"{ratio:.2g}x"
        return (
            f"{what}: {noun}, not started by a webhook: {implied}; sized for {asked} as asked, {gap} the "
            "schedule's rate (drop --rps to size for the schedule)"
        )
    kinds = {
        "manual": "started by hand in the editor",
        "subworkflow": "a sub-workflow, started by the workflows that call it (their rate is its rate)",
        "error": "an error workflow, started when another workflow fails",
        "event": "started by events (a queue, a mailbox, a database or n8n itself) whose rate is not in the export",
    }
    return f"{what}: {kinds.get(trigger.kind, trigger.kind)}, not started by a webhook; sized for {asked}"
