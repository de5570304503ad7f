"""PNG plots for the report (matplotlib, Agg backend, imported only when a report is drawn).

Every figure: a title naming the setup and host, labelled axes with units, a legend. Time-series plots
shade the load steps and name them, so a rise in CPU or queue depth lines up with the rate that caused it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from n8n_sizer.report.model import host_label, setup_label
from n8n_sizer.runs.stats import select, stack_ram_by_tick
from n8n_sizer.safety.text import printable

if TYPE_CHECKING:
    from n8n_sizer.report.model import RunData, StepRow

DPI = 110
STEP_COLOURS = ("#dbe9f6", "#fde9d4")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    # Names in titles, legends and ticks come from run files: a `$` there must stay a `$`, never start mathtext
    # (a name like `$\\frac` made matplotlib raise), and control characters never reach a label (see `_clean`).
    matplotlib.rcParams["text.parse_math"] = False
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    """Lay out, write the PNG and free the figure (pyplot keeps every open figure otherwise)."""
    import io

    from n8n_sizer.safety.write import write_atomic

    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, dpi=DPI, format="png")
    _pyplot().close(fig)
    write_atomic(path, png.getvalue(), private=False, what=f"plot {path}")  # whole or not at all, never via a link
    return path


def _dress(
    ax, xlabel: str, ylabel: str, title: str, *, title_size: float | None = None, legend: dict | None = None, **grid
) -> None:
    """What every chart here carries: both axis labels, a title, a light grid and, where given, the legend."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, **({} if title_size is None else {"fontsize": title_size}))
    ax.grid(True, alpha=0.3, **grid)
    if legend is not None:
        ax.legend(fontsize=8, **legend)


def _per_min_text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}/min"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


def plot_answered_vs_offered(rows: Sequence[StepRow], path: Path) -> Path | None:
    """Answered vs offered rate, one line per setup (and host), with the ideal answered = offered."""
    rate_rows = [r for r in rows if r.offered_rate_per_s is not None]
    if not rate_rows:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 5))
    series: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
    for r in rate_rows:
        series[f"{r.setup} on {r.host}"].append(
            (r.offered_rate_per_s, (r.answered_per_min or 0.0) / 60, sum(r.errors.values()))
        )
    top = max(r.offered_rate_per_s for r in rate_rows) * 1.1
    ax.plot([0, top], [0, top], linestyle="--", color="grey", linewidth=1, label="answered = offered")
    for label, points in sorted(series.items()):
        points.sort()
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        (line,) = ax.plot(xs, ys, marker="o", linewidth=2, label=label)
        for x, y, errors in points:
            if errors:  # errors next to the point: seed 000's table puts them beside answered/min
                ax.annotate(
                    f"{errors:,} err",
                    (x, y),
                    textcoords="offset points",
                    xytext=(6, -12),
                    fontsize=8,
                    color=line.get_color(),
                )
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    hosts = sorted({r.host for r in rate_rows})
    _dress(
        ax,
        "offered rate (requests/s)",
        "answered rate, HTTP 2xx (requests/s)",
        f"Answered vs offered rate\n{', '.join(hosts)}",
        title_size=11,
        legend={"loc": "upper left"},
    )
    return _save(fig, path)


def plot_latency_by_step(rows: Sequence[StepRow], path: Path) -> Path | None:
    """p50/p95/p99 per step for one setup on one host, log scale (seed 000 spans 0.9 s to 120 s)."""
    rows = [r for r in rows if r.p50_ms is not None]
    if not rows:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(5.5, 1.3 * len(rows) + 3), 4.5))
    width = 0.26
    for i, (q, colour) in enumerate((("p50", "#4c72b0"), ("p95", "#dd8452"), ("p99", "#c44e52"))):
        measured = [getattr(r, f"{q}_ms") for r in rows]  # None: nothing answered in the step
        values = [float("nan") if v is None else v for v in measured]  # no bar, never a 0 ms one
        bars = ax.bar([x + (i - 1) * width for x in range(len(rows))], values, width, label=q, color=colour)
        for bar, v in zip(bars, measured, strict=True):
            text = "no answer" if v is None else f"{v / 1000:.1f} s" if v >= 1000 else f"{v:.0f} ms"
            ax.annotate(
                text,
                (bar.get_x() + bar.get_width() / 2, v if v is not None else 1.0),
                ha="center",
                va="bottom",
                fontsize=7,
            )
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(
        [f"{printable(r.step, limit=40)}\n{_per_min_text(r.answered_per_min)}" for r in rows], fontsize=9
    )
    ax.set_yscale("log")
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    # plain "200 ms" / "2 s" ticks at 1-2-5 steps instead of matplotlib's 2x10^2
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1000:g} s" if v >= 1000 else f"{v:g} ms"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    _dress(
        ax,
        "load step (answered per minute)",
        "latency of answered requests (log scale)",
        f"Latency percentiles per step\n{rows[0].setup} on {rows[0].host}",
        title_size=11,
        legend={},
        axis="y",
        which="both",
    )
    return _save(fig, path)


def plot_throughput_vs_concurrency(rows: Sequence[StepRow], path: Path) -> Path | None:
    """Closed-model sweep (seed 002: 1/10/25/50 users): answered per second and p50 against users."""
    closed = [r for r in rows if r.concurrency is not None]
    if not closed:
        return None
    plt = _pyplot()
    fig, (ax, ax_lat) = plt.subplots(1, 2, figsize=(11, 4.5))
    series: dict[str, list[StepRow]] = defaultdict(list)
    for r in closed:
        series[f"{r.setup} on {r.host}"].append(r)
    for label, group in sorted(series.items()):
        group.sort(key=lambda r: r.concurrency)
        users = [r.concurrency for r in group]
        ax.plot(users, [(r.answered_per_min or 0.0) / 60 for r in group], marker="o", linewidth=2, label=label)
        ax_lat.plot(users, [r.p50_ms or float("nan") for r in group], marker="o", linewidth=2, label=label)
    ax.set_ylim(bottom=0)
    ax_lat.set_ylim(bottom=0)
    _dress(
        ax,
        "concurrent users (closed model)",
        "answered, HTTP 2xx (requests/s)",
        "Throughput vs concurrency",
        title_size=10,
        legend={"loc": "lower right"},
    )
    _dress(
        ax_lat, "concurrent users (closed model)", "p50 latency (ms)", "Median latency vs concurrency", title_size=10
    )
    fig.suptitle(f"Concurrency sweep on {', '.join(sorted({r.host for r in closed}))}", fontsize=11)
    return _save(fig, path)


def plot_rows(rows: Sequence[StepRow], out_dir: Path) -> list[Path]:
    made = [
        plot_answered_vs_offered(rows, out_dir / "answered_vs_offered.png"),
        plot_throughput_vs_concurrency(rows, out_dir / "throughput_vs_concurrency.png"),
    ]
    groups: dict[tuple[str, str], list[StepRow]] = defaultdict(list)
    for r in rows:
        groups[(r.run_id, r.target)].append(r)
    for (run_id, target), group in groups.items():
        made.append(plot_latency_by_step(group, out_dir / f"latency_{_slug(run_id)}_{_slug(target)}.png"))
    return [p for p in made if p is not None]


def _process_name(s) -> str:
    return s.labels.get("process") or s.labels.get("container") or "?"


def plot_run_target(run: RunData, target: str, out_dir: Path) -> list[Path]:
    """CPU per process, RAM per process (and the stack's total), host iowait and queue depth over time."""

    samples = run.samples_of(target)
    cpu = [s for s in samples if s.metric in ("process_cpu_cores", "container_cpu_cores")]
    ram = [s for s in samples if s.metric in ("process_rss_mib", "container_mem_mib")]
    iowait = select(samples, "host_cpu_pct", state="iowait")
    queue = select(samples, "n8n_scaling_mode_queue_jobs_waiting") + select(
        samples, "n8n_scaling_mode_queue_jobs_active"
    )
    bull = select(samples, "bull_jobs")
    if not (cpu or ram or iowait or queue or bull):
        return []
    windows = run.windows(target)
    times = [s.time_s for s in cpu + ram + iowait + queue + bull]
    t0 = min([*times, *(w[0] for w in windows.values())])
    plt = _pyplot()
    fig, axes = plt.subplots(4, 1, figsize=(11.5, 10.5), sharex=True)
    for ax in axes:
        for i, (start, end) in enumerate(windows.values()):
            ax.axvspan(start - t0, end - t0, color=STEP_COLOURS[i % 2], zorder=0)
    for step, (start, end) in windows.items():
        axes[0].annotate(
            step,
            ((start + end) / 2 - t0, 0.97),
            xycoords=("data", "axes fraction"),
            ha="center",
            va="top",
            fontsize=9,
            fontweight="bold",
            bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none", "alpha": 0.8},
        )

    def lines(ax, rows, label_of, unit_label):
        for name, points in _top_series(_group(rows, label_of)):
            ax.plot([t - t0 for t, _ in points], [v for _, v in points], linewidth=1.4, label=name)
        ax.set_ylabel(unit_label)
        ax.grid(True, alpha=0.3)
        if rows:
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        else:
            ax.text(0.5, 0.5, "no samples", transform=ax.transAxes, ha="center", va="center", color="grey")

    lines(axes[0], cpu, _process_name, "CPU (cores)")
    busy = _host_busy(samples)
    if busy:  # everything the host ran, the load generator and neighbours included
        axes[0].plot(
            [t - t0 for t, _ in busy],
            [v for _, v in busy],
            color="black",
            linestyle="--",
            linewidth=1.2,
            label="host, all processes",
        )
        axes[0].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    cpus = [s.value for s in select(samples, "host_cpus")]
    if cpus:
        axes[0].axhline(1.0, color="black", linestyle=":", linewidth=1)
        axes[0].set_ylim(0, max(cpus) + 0.6)  # room for the step names at the top
    axes[0].set_title("CPU per process (1.0 = one core busy)", fontsize=10, loc="left")
    lines(axes[1], ram, _process_name, "RAM (MiB)")
    total = stack_ram_by_tick(ram)
    if total:
        axes[1].plot([t - t0 for t, _ in total], [v for _, v in total], color="black", linewidth=2, label="whole stack")
        axes[1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    axes[1].set_title("Resident memory per process", fontsize=10, loc="left")
    lines(axes[2], iowait, lambda s: "iowait", "iowait (% of all CPU time)")
    axes[2].set_title("Host iowait (the e2-micro soak: the only signal of a disk stall)", fontsize=10, loc="left")
    lines(
        axes[3],
        queue or bull,
        lambda s: s.metric.rsplit("_", 1)[-1] if s.metric.startswith("n8n_") else s.labels.get("state", "?"),
        "jobs",
    )
    axes[3].set_title(
        "Queue depth (n8n /metrics or Redis LLEN)" if queue or bull else "Queue depth (regular mode: no queue)",
        fontsize=10,
        loc="left",
    )
    axes[3].set_xlabel("time since the first sample or step (s)")
    fig.suptitle(
        f"{setup_label(run.setup(target))} on {host_label(target, run.facts(target))}: CPU, RAM, iowait, queue\n"
        f"run {run.manifest.run_id}; shaded bands are load steps",
        fontsize=11,
    )
    return [_save(fig, out_dir / f"timeseries_{_slug(run.manifest.run_id)}_{_slug(target)}.png")]


def _group(rows, label_of) -> dict[str, list]:
    groups: dict[str, list] = defaultdict(list)
    for s in rows:
        groups[label_of(s)].append(s)
    return groups


def _host_busy(samples) -> list[tuple[float, float]]:
    """(time, cores busy) of the whole host: every CPU state but idle and iowait, per tick."""
    ticks: dict[float, float] = defaultdict(float)
    for s in select(samples, "host_cpu_cores"):
        if s.labels.get("state") not in ("idle", "iowait"):
            ticks[s.time_s] += s.value
    return sorted(ticks.items())


MAX_LINES = 9  # more lines than this in one panel cannot be told apart; the smallest are summed


def _top_series(groups: dict[str, list]) -> list[tuple[str, list[tuple[float, float]]]]:
    """Each group's (time, value) series; beyond MAX_LINES, the groups with the lowest mean are summed
    per tick into one "N others" line (so a fleet host with many containers stays readable)."""
    series = {name: sorted((s.time_s, s.value) for s in rows) for name, rows in groups.items()}
    ranked = sorted(series, key=lambda n: -sum(v for _, v in series[n]) / max(1, len(series[n])))
    if len(ranked) <= MAX_LINES:
        return sorted(series.items())
    keep, rest = ranked[: MAX_LINES - 1], ranked[MAX_LINES - 1 :]
    summed: dict[float, float] = defaultdict(float)
    for name in rest:
        for t, v in series[name]:
            summed[t] += v
    return sorted((n, series[n]) for n in keep) + [(f"{len(rest)} others, summed", sorted(summed.items()))]


def plot_shaped_steps(run: RunData, target: str, out_dir: Path) -> list[Path]:
    """For each ramp or burst step: requests scheduled per second (the offered shape) against those answered 2xx
    and those refused or failed per second, so a backlog shows as answers trailing the burst."""
    from n8n_sizer.runs.stats import is_shaped, per_second

    made = []
    for step in sorted({r.step for r in run.requests if r.target == target and is_shaped(r.step)}):
        rows = per_second([r for r in run.requests if r.target == target and r.step == step])
        if not rows:
            continue
        plt = _pyplot()
        fig, ax = plt.subplots(figsize=(11.5, 4.2))
        xs = [s for s, *_ in rows]
        ax.step(xs, [sched for _, sched, _, _ in rows], where="post", linewidth=1.6, label="scheduled (offered)")
        ax.plot(xs, [ok for _, _, ok, _ in rows], linewidth=1.4, label="answered 2xx")
        ax.plot(xs, [bad for _, _, _, bad in rows], linewidth=1.0, linestyle="--", label="refused or failed")
        _dress(
            ax,
            "seconds from the step's start",
            "requests per second",
            f"{step}: offered vs answered, {setup_label(run.setup(target))} on {host_label(target, run.facts(target))}",
            legend={"loc": "upper right"},
        )
        made.append(_save(fig, out_dir / f"shape-{_slug(run.manifest.run_id)}-{_slug(target)}-{_slug(step)}.png"))
    return made
