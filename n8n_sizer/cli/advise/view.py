"""`advise`: check the inputs, call the advisor, print the recommendation (PGTune style) or JSON."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from n8n_sizer.cli.advise.answer_text import print_burst, print_recommendation
from n8n_sizer.cli.advise.inputs import AdviseOptions, check_burst, check_given, check_inputs, check_workflow
from n8n_sizer.errors import InputError


def run_advise(o: AdviseOptions) -> int:
    from n8n_sizer.advisor.engine import build_advisor
    from n8n_sizer.advisor.profiles import profile_for
    from n8n_sizer.advisor.recommend import MAX_HOSTS_DEFAULT, Request

    workload, compose, arch = o.workload, o.compose, o.arch  # each is replaced below once it is resolved
    check_workflow(o)
    asked_rps = o.rps  # None: a schedule's own rate (the price's note says which)
    if o.workflow is not None and o.rps is None and not o.validate:  # a schedule's own rate, when it says one
        from dataclasses import replace

        from n8n_sizer.cli.advise.workflow import workflow_rate

        o = replace(o, rps=workflow_rate(o.workflow))
    mix_in = history = mix = None
    if o.history is not None or o.from_n8n is not None:  # the instance's mix (cli/advise/mix.py) gives --rps
        from n8n_sizer.cli.advise.mix import mix_options

        o, mix_in, history = mix_options(o)
    elif o.scale or o.since or o.until or o.api_key_file is not None:
        from n8n_sizer.cli.advise.mix import check_history_options

        check_history_options(o)
    check_inputs(
        o.rps,
        o.vcpu,
        arch,
        o.provider,
        o.p95_ms,
        o.validate,
        None if o.workflow else o.cpu_ms,
        None if o.workflow else o.wait_ms,
        workload,
        o.max_hosts,
    )
    check_burst(o.burst, o.burst_seconds, o.validate, o.drain_seconds)
    check_given(o.topology, o.on_this_machine, o.validate, o.vcpu, o.max_hosts, o.provider, compose)
    workload_given = workload is not None
    workload = workload or "light"
    if o.quick and not o.validate:
        raise InputError("--quick shortens --validate (no per-role steps); add --validate, or drop --quick")
    if o.validate and compose is not None:
        raise InputError("--validate renders no stack, so --compose would be ignored; drop one of them")
    if compose is not None:
        from n8n_sizer.safety.files import require_output_folder

        compose = require_output_folder(compose, "--compose", fix="try --compose ./n8n-stack")
    extra = None
    if o.results is not None and o.workflow is not None:  # the runs refine the cost table (not the model)
        from n8n_sizer.safety.files import require_folder

        require_folder(o.results, "--results", fix="pass the folder bench wrote its runs into, e.g. --results results")
    elif o.results is not None:
        from n8n_sizer.runs.fit_input import load_results
        from n8n_sizer.safety.files import require_folder

        require_folder(o.results, "--results", fix="pass the folder bench wrote its runs into, e.g. --results results")
        extra = load_results(o.results)
        from n8n_sizer.cli.args import check_result_specs

        check_result_specs(o.results)  # every field of run.json, the bench's own spec included (issue 40)
    user_workflows = sorted({m.workflow for m in extra or ()} - {"light", "code-heavy"})
    if not workload_given and o.cpu_ms is None and o.wait_ms is None and len(user_workflows) == 1:
        workload = user_workflows[0]  # the runs measured one workflow of yours: the question is about it
    price = None
    if o.workflow is not None:
        from n8n_sizer.cli.advise.workflow import priced_profile

        profile, price = priced_profile(
            o.workflow,
            items=o.items,
            cpu_ms=o.cpu_ms,
            wait_ms=o.wait_ms,
            calibration=o.calibration,
            engine=o.expression_engine,
            results=o.results,
            waits=o.wait,
            branches=o.branch,
            rps=asked_rps,
        )
    elif workload in user_workflows and o.cpu_ms is None and o.wait_ms is None:
        profile = None  # the user's own workflow, measured in their results: its own fitted demand
    else:
        profile = profile_for(workload, o.cpu_ms, o.wait_ms)
    if o.validate:
        from n8n_sizer.cli.advise.validate import print_validation

        return print_validation(extra, o.json_out, o.quick)
    advisor = build_advisor(extra)
    if profile is None:
        from n8n_sizer.advisor.profiles import user_profile

        profile = user_profile(workload)
        if not advisor.fitted.knows(profile):
            raise InputError(
                f"--workload {workload}: your results hold no capacity point and no per-role CPU row "
                f"for it; run `n8n-sizer bench --local --workflow {workload}.json --rates 4,8,16,32` "
                "(a step that saturates, with telemetry) and pass its folder to --results"
            )
    if mix_in is not None:  # the blend of the mix's profiles, at its total rate (advisor/mix.py)
        from n8n_sizer.cli.advise.mix import size_history_mix

        mix = size_history_mix(mix_in, advisor)
        profile = mix.profile
    layout, given_hosts, one_setup, one_option = None, None, None, None
    if o.topology is not None:
        from n8n_sizer.cli.advise.given import given_layout_from

        given = given_layout_from(o.topology, advisor, o.on_this_machine)
        arch = given[3] if given[0] == "one-host" else given[2]
        if given[0] == "one-host":
            one_setup, one_option = given[1], given[2]
        else:
            layout, given_hosts = given[1], given[3]
    # --vcpu N asks about one N-vCPU server first (the ways past it follow as alternatives); --max-hosts M with it
    # asks for the cheapest setup of N-vCPU hosts; without --vcpu, the cheapest comfortable answer of any size.
    one_first = o.max_hosts is None and (o.vcpu is not None or compose is not None)
    req = Request(
        rps=o.rps,
        vcpu=o.vcpu,
        arch=arch,
        provider=o.provider,
        profile=profile,
        p95_ms=o.p95_ms,
        max_hosts=o.max_hosts if o.max_hosts is not None else 1 if one_first else MAX_HOSTS_DEFAULT,
    )
    try:
        rec = _answer(advisor, req, layout, given_hosts, one_setup, one_option)
    except ValidationError as exc:  # e.g. Little's law asks for more in-flight executions than a Setup allows
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "setup"
        raise InputError(
            f"no stack n8n-sizer renders fits these inputs: the {where} it would need is out of range "
            f"({first.get('msg')}, got {first.get('input')}); lower --rps or --wait-ms"
        ) from None
    if price is not None and rec.mode == "queue":  # a queue answer is priced from the queue-mode figures
        q_profile, q_price = priced_profile(
            o.workflow,
            items=o.items,
            cpu_ms=o.cpu_ms,
            wait_ms=o.wait_ms,
            calibration=o.calibration,
            engine=o.expression_engine,
            mode="queue",
            results=o.results,
            waits=o.wait,
            branches=o.branch,
            rps=asked_rps,
        )
        q_req = req.model_copy(update={"profile": q_profile})
        q_rec = _answer(advisor, q_req, layout, given_hosts, one_setup, one_option)
        if q_rec.mode == "queue":
            req, rec, price = q_req, q_rec, q_price
    if mix is not None and rec.mode == "queue":  # as for --workflow: a queue answer priced from the queue figures
        from n8n_sizer.cli.advise.mix import requeued

        q_mix = requeued(history, o, advisor)
        q_req = req.model_copy(update={"profile": q_mix.profile})
        q_rec = _answer(advisor, q_req, layout, given_hosts, one_setup, one_option)
        if q_rec.mode == "queue":
            req, rec, mix = q_req, q_rec, q_mix
    surge, sized = None, None
    targets = o.p95_ms is not None or o.drain_seconds is not None
    if o.burst is not None and o.topology is None and targets and not one_first:
        rec, surge, sized = _sized_for_burst(advisor, o, req)
    if price is not None:
        rec = _with_price(advisor, o, req, rec, price)
    changes = (
        _changes(
            build_advisor(None),
            advisor,
            req,
            rec,
            lambda adv: _answer(adv, req, layout, given_hosts, one_setup, one_option),
        )
        if extra
        else None
    )
    if extra:  # never advise past the user's own evidence (the same rule the report's advice applies)
        from n8n_sizer.runs.evidence import overrule

        rec, _ = overrule(rec, extra, workload)
    if compose is not None and rec.hosts > 1:  # --compose alone asks the single-server question (above)
        raise InputError(
            f"--compose writes a single-host stack, and this answer is {rec.hosts} hosts: save it with "
            f"--json > advice.json and run `{rec.render_command}`, or use --max-hosts 1"
        )
    written = _write_compose(rec, compose, o.generate_missing_secrets) if compose is not None else None
    if o.burst is not None and sized is None:
        rec, surge = _burst_on(advisor, o, req, rec, targets)
    if o.json_out:
        data = rec.model_dump(mode="json")
        if surge is not None:
            data["burst"] = surge.model_dump(mode="json")
        if changes is not None:
            data["changes"] = changes
        if price is not None:
            data["workflow_price"] = price.model_dump(mode="json")
        if written is not None:
            data["compose"] = {"dir": str(compose), "messages": written}
        if mix is not None:
            from n8n_sizer.cli.advise.mix import mix_json

            data["mix"] = mix_json(mix, mix_in, history, str(o.history or o.from_n8n))
        print(json.dumps(data, indent=2))
    else:
        if mix is not None:
            from n8n_sizer.cli.advise.mix import print_mix

            print_mix(mix, mix_in, history, str(o.history or o.from_n8n))
        print_recommendation(rec, changes, written, compose, bool(extra))
        if surge is not None:
            print_burst(surge)
    return 0


def _sized_for_burst(advisor, o: AdviseOptions, req):
    """(answer, burst advice, rate sized for): the answer sized up until the burst meets the targets, judged at the
    rate asked; its first warning says what the burst misses at the rate asked, when it had to size up."""
    from n8n_sizer.advisor.answer.burst import misses, size_for_burst

    rec, surge, sized, first = size_for_burst(
        lambda rate: _answer(advisor, req, None, None, None, None, sized_for=rate),
        lambda rate, at: advisor.p95_at(req, at, sized_for=rate),
        o.rps,
        o.burst,
        o.burst_seconds,
        o.p95_ms,
        o.drain_seconds,
    )
    warnings = []
    if sized > o.rps:
        warnings.append(
            f"sized for {sized:.3g}/s, not {o.rps:g}/s: the answer for {o.rps:g}/s carries about "
            f"{first.capacity_per_s:.1f}/s, and the {o.burst:g}x burst for {o.burst_seconds:g} s would miss your "
            f"targets: " + "; ".join(misses(first, o.p95_ms, o.drain_seconds))
        )
    still = misses(surge, o.p95_ms, o.drain_seconds)
    if still:
        warnings.append(f"even sized for {sized:.3g}/s the {o.burst:g}x burst misses your targets: " + "; ".join(still))
    request = {**rec.request, "sized_for_rps": sized} if sized > o.rps else rec.request
    return rec.model_copy(update={"request": request, "warnings": [*warnings, *rec.warnings]}), surge, sized


def _burst_on(advisor, o: AdviseOptions, req, rec, targets: bool):
    """(answer, burst advice) for the answer as it is (one server first, or a topology given): a warning says what
    the burst misses, in its own figures, when it misses a target."""
    from n8n_sizer.advisor.answer.burst import burst_advice, misses

    peak = o.rps * o.burst
    if o.topology is None:  # the search's answer: its p95 at the base rate and at the peak, whatever the target
        base_p95, peak_p95 = advisor.p95_at(req, o.rps), advisor.p95_at(req, peak)
    else:
        base_p95, peak_p95 = rec.p95_ms, None
    surge = burst_advice(o.rps, o.burst, o.burst_seconds, rec.capacity_per_s.mid, base_p95, rec.mode, peak_p95)
    missed = misses(surge, o.p95_ms, o.drain_seconds) if targets else []
    if missed:
        how = "" if o.topology is not None else "; ask without --vcpu (or with --max-hosts) to be sized for it"
        note = f"this setup does not absorb the {o.burst:g}x burst within your targets: " + "; ".join(missed) + how
        rec = rec.model_copy(update={"warnings": [note, *rec.warnings]})
    return rec, surge


def _with_price(advisor, o: AdviseOptions, req, rec, price):
    """The answer with what its price says: unknown node types, and the expression engine as a lever (priced again
    under the other engine, never switched silently)."""
    from n8n_sizer.cli.advise.workflow import price_warnings, priced_profile

    other = None
    if o.expression_engine == "default":
        legacy, _ = priced_profile(
            o.workflow,
            items=o.items,
            cpu_ms=o.cpu_ms,
            wait_ms=o.wait_ms,
            calibration=o.calibration,
            engine="legacy",
            mode=price.mode,
            results=o.results,
            waits=o.wait,
            branches=o.branch,
            rps=o.rps,
        )
        if rec.hosts == 1 and rec.server.vcpu >= 1:  # the same size of server, its best setup under legacy
            same = req.model_copy(update={"profile": legacy, "vcpu": int(rec.server.vcpu), "max_hosts": 1})
            other = advisor.recommend(same).capacity_per_s.mid
    notes = price_warnings(price, o.expression_engine, other, rec.capacity_per_s.mid)
    request = {
        **rec.request,
        "workload": price.name,
        "workflow": str(o.workflow),
        "items": price.items,
        "expression_engine": price.engine,
        "priced_mode": price.mode,
        "trigger": None if price.trigger is None else price.trigger.model_dump(mode="json"),
        "wait_ms": price.wait_ms,
    }
    if price.refined_from:
        notes.append(f"the cost table was refined by your runs ({'; '.join(price.refined_from)}) before pricing")
    elif o.results is not None:
        notes.append(
            f"--results {o.results}: no run there refines the cost table for this answer's mode "
            f"({price.mode}); bench your workflow and light on the same host and mode"
        )
    return rec.model_copy(update={"warnings": [*rec.warnings, *notes], "request": request})


def _answer(advisor, req, layout, given_hosts, one_setup, one_option, sized_for=None):
    """The advisor's answer: to a topology the user gave (one host or several), else the search's (sized for
    `sized_for` when a burst asks more), with the priced ways past it."""
    if one_setup is not None:
        return advisor.evaluate_one_host(req, one_setup, one_option)
    return advisor.answer(req, sized_for=sized_for) if layout is None else advisor.evaluate(req, layout, given_hosts)


def _changes(before, after, req, new, answer) -> dict:
    """What the user's results changed: parameters and the recommendation (`new` is after's answer to `req`;
    `answer(advisor)` asks the same question of another advisor)."""
    from n8n_sizer.advisor.fit import is_user_point

    known_before = before.fitted.knows(req.profile)
    old = None  # a workflow only your results measured is new
    if known_before:
        old = answer(before)
    params = {}
    for name, value in after.model.params.items():
        prior = before.model.params.get(name)
        if prior is None or abs(value - prior) > 1e-3 * max(abs(prior), 1e-9):
            params[name] = {"before": prior, "after": value}
    user_points = [p.measurement.id for p in after.fitted.points if is_user_point(p.measurement)]
    user_excluded = [
        {"id": e.measurement.id, "reason": e.reason} for e in after.fitted.excluded if is_user_point(e.measurement)
    ]
    return {
        "reference_host": {"before": before.model.reference_class, "after": after.model.reference_class},
        "user_points": user_points,
        "user_excluded": user_excluded,
        "params": params,
        "recommendation": {
            "before": None
            if old is None
            else {"mode": old.mode, "workers": old.workers, "capacity_per_s": old.capacity_per_s.mid},
            "after": {"mode": new.mode, "workers": new.workers, "capacity_per_s": new.capacity_per_s.mid},
        },
    }


def _write_compose(rec, out_dir: Path, generate_missing_secrets: bool = False) -> list[str]:
    from n8n_sizer.bundle.render import write_bundle

    return write_bundle(rec.setup, out_dir, generate_missing_secrets=generate_missing_secrets)
