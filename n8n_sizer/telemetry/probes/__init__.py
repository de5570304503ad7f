"""Telemetry probes, pyinfra style: a probe is a shell command plus a pure parser of its output.

Every parser takes the command's stdout, the time the reading was taken and the labels to stamp on
(host, process, container...) and returns `Sample`s. Cumulative counters (CPU seconds, disk bytes) are
returned as-is with a metric name ending in `_total`; `n8n_sizer.telemetry.probes.rates` turns two consecutive
readings into rates. Parsers are tested on output captured from real programs in `tests/data/probes/`.

Several probes run as ONE shell command per tick (`batch_command`), so a 1 s sampling interval costs one
fork (or one SSH round trip) per host, not one per probe; `split_batch` cuts the output back apart and
keeps each probe's exit code, so a failed probe becomes an error sample instead of vanishing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from n8n_sizer.runs.records import Sample

Parser = Callable[[str, float, Mapping[str, str]], list[Sample]]

_MARK = "@@n8n-sizer-probe"


@dataclass(frozen=True)
class Probe:
    """One telemetry probe: `command` runs on the host (sh), `parse` turns its stdout into samples."""

    name: str
    command: str
    parse: Parser
    labels: Mapping[str, str] | None = None  # stamped on every sample of this probe (process, container)
    every: int = 1  # run on every n-th sampler tick (probes that are costlier than a `cat`)

    def samples(self, text: str, time_s: float, labels: Mapping[str, str]) -> list[Sample]:
        return self.parse(text, time_s, {**labels, **(self.labels or {})})


@dataclass(frozen=True)
class ProbeOutput:
    """What one probe printed inside a batch, and its exit code (None when the batch was cut short)."""

    name: str
    exit_code: int | None
    text: str


def batch_command(probes: Sequence[Probe]) -> str:
    """One sh script that runs every probe in turn, each framed by markers carrying its exit code.

    stderr of each probe is folded into its own frame so an error message lands in its error sample.
    """
    parts = []
    for probe in probes:
        if not re.fullmatch(r"[A-Za-z0-9_.:-]+", probe.name):
            raise ValueError(f"probe name {probe.name!r} must be a plain token")
        parts.append(
            f"echo '{_MARK} begin {probe.name}'; ( {probe.command} ) 2>&1; echo \"{_MARK} end {probe.name} $?\""
        )
    return "; ".join(parts)


def split_batch(text: str) -> dict[str, ProbeOutput]:
    """Cut the output of `batch_command` back into one `ProbeOutput` per probe."""
    outputs: dict[str, ProbeOutput] = {}
    current: str | None = None
    lines: list[str] = []
    for line in text.splitlines():
        end_at = line.find(_MARK + " end ")
        if end_at > 0:  # output without a final newline: the end marker shares its last line
            lines.append(line[:end_at])
            line = line[end_at:]
        if line.startswith(_MARK + " begin "):
            if current is not None:  # previous probe never printed its end marker
                outputs[current] = ProbeOutput(current, None, "\n".join(lines))
            current, lines = line.split(" ", 2)[2].strip(), []
        elif line.startswith(_MARK + " end ") and current is not None:
            _, _, name, code = line.split(" ", 3)
            outputs[name] = ProbeOutput(name, int(code), "\n".join(lines) + ("\n" if lines else ""))
            current, lines = None, []
        elif current is not None:
            lines.append(line)
    if current is not None:
        outputs[current] = ProbeOutput(current, None, "\n".join(lines))
    return outputs


def sample(metric: str, value: float, unit: str, time_s: float, labels: Mapping[str, str], **more: str) -> Sample:
    """A `Sample` with the probe's labels plus `more`."""
    return Sample(metric=metric, value=float(value), unit=unit, labels={**labels, **more}, time_s=time_s)


class ProbeParseError(ValueError):
    """The probe's output did not have the expected shape; the sampler records it as an error sample."""
