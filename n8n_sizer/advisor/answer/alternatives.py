"""The question asked first, then the ways past it.

With `--vcpu N` a person owns (or is about to buy) one N-vCPU server: the answer is the best setup on one such
host and what it carries. Then, each priced and answered the same way, with the command that asks for it first:
- the cheapest single host (any catalog size of the provider and arch) that carries the rate;
- the cheapest cluster of N-vCPU hosts;
- the cheapest cluster of any size, when it is cheaper than that.
Without `--vcpu` the answer is the cheapest comfortable one, and the alternatives name the cheapest single host
when the answer is a cluster. An alternative the primary already is, or another alternative repeats, is left out,
and so is one that neither carries the rate with headroom nor has more capacity than the answer: a smaller server
than yours is no way past it (`advise --rps 200 --vcpu 16` once offered a CX43 at 75/s beside your 150/s).
"""

from __future__ import annotations

import shlex

from n8n_sizer.advisor.answer.base import Alternative, OneHost, Recommendation, Request


def one_host_of(rec: Recommendation) -> OneHost:
    g = rec.topology[0]
    return OneHost(
        vcpu=g.vcpu,
        arch=rec.server.arch,
        provider=g.provider,
        size=g.size,
        monthly_eur=g.monthly_eur,
        mode=rec.mode,
        workers=rec.workers,
        concurrency=rec.concurrency,
        production_limit=rec.production_limit,
        runner_concurrency=rec.runner_concurrency,
        concurrency_per_vcpu=rec.concurrency_per_vcpu,
        db_pool_size=rec.db_pool_size,
        capacity_per_s=rec.capacity_per_s,
        carries=rec.feasible,
        comfortable=rec.comfortable,
        bound=rec.bound,
        price_estimated=rec.price_estimated,
    )


def advise_command(req: Request, vcpu: int | None, max_hosts: int | None) -> str:
    """The `advise` command line that answers with this option first."""
    r = req.profile
    words = ["advise", "--rps", f"{req.rps:g}"]
    if vcpu is not None:
        words += ["--vcpu", str(vcpu)]
    if max_hosts is not None:
        words += ["--max-hosts", str(max_hosts)]
    if req.provider:
        words += ["--provider", req.provider]
    if req.arch != "x86":
        words += ["--arch", req.arch]
    if r.advise_args:  # e.g. a workflow priced from its export: --workflow FILE ... (no --workload names it)
        words += list(r.advise_args)
    elif r.name == "custom":
        words += ["--cpu-ms", f"{r.code_cpu_ms:g}", "--wait-ms", f"{r.wait_ms:g}"]
    elif r.name != "light":
        words += ["--workload", r.name]
    if req.p95_ms is not None:
        words += ["--p95-ms", f"{req.p95_ms:g}"]
    return shlex.join(words)


def _alternative(what: str, rec: Recommendation, command: str) -> Alternative:
    return Alternative(
        what=what,
        monthly_eur=rec.monthly_eur,
        hosts=rec.hosts,
        capacity_per_s=rec.capacity_per_s,
        carries=rec.feasible,
        comfortable=rec.comfortable,
        mode=rec.mode,
        workers=rec.workers,
        webhook_processors=rec.webhook_processors,
        concurrency=rec.concurrency,
        production_limit=rec.production_limit,
        runner_concurrency=rec.runner_concurrency,
        db_pool_size=rec.db_pool_size,
        max_connections=rec.max_connections,
        topology=rec.topology,
        advise_command=command + " --json > advice.json",
        render_command=rec.render_command,
        price_estimated=rec.price_estimated,
    )


def _what(kind: str, rec: Recommendation, rps: float) -> str:
    if rec.comfortable:
        return f"the cheapest {kind} that carries {rps:g}/s with headroom"
    if rec.feasible:
        return (
            f"the {kind} that carries {rps:g}/s, with little headroom ({rps / rec.capacity_per_s.mid:.0%} of capacity)"
        )
    return f"the {kind} with the most capacity (it does not carry {rps:g}/s)"


def _same(a: Recommendation, b: Recommendation) -> bool:
    return [g.model_dump() for g in a.topology] == [g.model_dump() for g in b.topology] and a.workers == b.workers


def with_alternatives(recommend, req: Request, primary: Recommendation, cluster_hosts: int) -> Recommendation:
    """`primary` with `one_host` (when the question named a host size) and its priced alternatives;
    `recommend(request)` is the advisor's answer to another request, `cluster_hosts` the search's default."""
    asked = {req: primary}  # an alternative that asks the primary's own question is the primary (not asked twice)

    def answer(r: Request) -> Recommendation:
        if r not in asked:
            asked[r] = recommend(r)
        return asked[r]

    options: list[tuple[str, Recommendation, str]] = []
    single = answer(req.model_copy(update={"vcpu": None, "max_hosts": 1}))
    options.append((_what("single server", single, req.rps), single, advise_command(req, None, 1)))
    if req.vcpu is not None:
        own = answer(req.model_copy(update={"max_hosts": cluster_hosts}))
        options.append(
            (_what(f"setup of {req.vcpu}-vCPU hosts", own, req.rps), own, advise_command(req, req.vcpu, cluster_hosts))
        )
    anywhere = answer(req.model_copy(update={"vcpu": None, "max_hosts": cluster_hosts}))
    options.append((_what("setup of any size", anywhere, req.rps), anywhere, advise_command(req, None, None)))
    kept: list[Recommendation] = [primary]
    out: list[Alternative] = []
    for what, rec, command in options:
        if any(_same(rec, k) for k in kept):
            continue
        if not rec.comfortable and rec.capacity_per_s.mid <= primary.capacity_per_s.mid:
            continue  # neither carries the rate with headroom nor carries more than the answer: no way past it
        cheaper = [k for k in kept[1:] if k.comfortable and (k.monthly_eur or 0) <= (rec.monthly_eur or 0)]
        if rec.hosts > 1 and cheaper and rec.comfortable:
            continue  # a cluster dearer than a comfortable option already listed is no way past it
        kept.append(rec)
        out.append(_alternative(what, rec, command))
    one = one_host_of(primary) if req.vcpu is not None and primary.hosts == 1 else None
    return primary.model_copy(update={"one_host": one, "alternatives": out})
