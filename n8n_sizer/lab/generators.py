"""How a bench run reaches a lab (`LabTarget`: an SSH host per cluster host and per generator) and loads it: a
step's rate split evenly over the generator hosts, each running its share with the built-in driver over SSH
(`remote.load_agent`, in its own namespace) with sequence numbers from its own block, so they are unique across
generators; the records come back over SFTP, tagged with their generator, and are merged into one step."""

from __future__ import annotations

import shlex
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from n8n_sizer.bench.shapes import arrival_times, constant
from n8n_sizer.errors import RemoteError
from n8n_sizer.hosts.host import SshHost
from n8n_sizer.remote.protocol import Program, run
from n8n_sizer.runs.records import RequestRecord, StepTally
from n8n_sizer.runs.store import MAX_RECORDS_BYTES, parse_jsonl
from n8n_sizer.safety.files import read_user_text
from n8n_sizer.safety.write import write_atomic

LAB_TARGET = "cluster"  # the one target of a lab run: results, ledger and report stay one folder
AGENT_GRACE_S = 30.0  # after its share ends, how long a generator's requests in flight may still answer


def split_rate(rate_per_s: float, generators: int) -> list[float]:
    """The step's rate split evenly over the generators (each offers its share at its own even spacing)."""
    if generators < 1:
        raise ValueError("at least one generator")
    return [rate_per_s / generators] * generators


def share_counts(rates: Sequence[float], duration_s: float) -> list[int]:
    """How many requests each generator's share schedules: exactly the driver's own schedule (arrival_times)."""
    return [len(arrival_times(constant(r), duration_s)) for r in rates]


def seq_starts(seq_start: int, counts: Sequence[int]) -> list[int]:
    """Each generator's first sequence number: consecutive blocks from `seq_start`, so none collide."""
    out, at = [], seq_start
    for n in counts:
        out.append(at)
        at += n
    return out


def merge_records(parts: Sequence[Sequence[RequestRecord]]) -> list[RequestRecord]:
    """The generators' records as one list by sequence number; a duplicate number is a broken split."""
    merged = sorted((r for part in parts for r in part), key=lambda r: r.seq)
    for a, b in pairwise(merged):
        if a.seq == b.seq:
            raise RemoteError(f"generators {a.generator} and {b.generator} both recorded request {a.seq}")
    return merged


def merge_tallies(step: str, tallies: Sequence[dict]) -> StepTally:
    """One step's tally from the generators' own (the earliest start, the latest end, the sums)."""
    sent = [t["last_sent_s"] for t in tallies if t.get("last_sent_s") is not None]
    return StepTally(
        step=step,
        started_s=min(t["started_s"] for t in tallies),
        finished_s=max(t["finished_s"] for t in tallies),
        scheduled=sum(t["scheduled"] for t in tallies),
        sent=sum(t["sent"] for t in tallies),
        last_sent_s=max(sent) if sent else None,
    )


@dataclass
class LabTarget:
    """How a run reaches a lab: its inventory file, an SSH host per cluster host and per generator."""

    inventory_path: Path
    hosts: dict[str, SshHost]
    generators: dict[str, SshHost]
    python: str = sys.executable  # every namespace shares this machine's filesystem and venv
    cluster: object | None = None  # lab.deploy.LabCluster once `bring_up` ran
    reused: bool = False

    def close(self) -> None:
        for host in [*self.hosts.values(), *self.generators.values()]:
            host.close()


def run_lab_step(
    lab: LabTarget,
    *,
    url: str,
    body: bytes,
    rate_per_s: float,
    duration_s: float,
    step: str,
    seq_start: int,
    timeout_s: float,
    max_in_flight: int,
    run_id: str,
    scratch: Path,
) -> tuple[list[RequestRecord], StepTally]:
    """One rate step from every generator at once: each its share, its own seq block; merged records and tally."""
    names = sorted(lab.generators)
    rates = split_rate(rate_per_s, len(names))
    starts = seq_starts(seq_start, share_counts(rates, duration_s))
    body_file = scratch / "body"
    write_atomic(body_file, body, private=True)
    results: dict[str, tuple[list[RequestRecord], dict]] = {}
    errors: dict[str, BaseException] = {}
    deadline = duration_s + min(timeout_s, AGENT_GRACE_S)

    def one(gen: str, rate: float, first: int) -> None:
        host = lab.generators[gen]
        remote = f"/tmp/n8nsz-{run_id}-{step}-{gen}.jsonl"
        remote_body = f"/tmp/n8nsz-{run_id}-{step}-{gen}.body"
        args = [
            "--url",
            url,
            "--body-file",
            remote_body,
            "--rate",
            f"{rate:g}",
            "--duration",
            f"{duration_s:g}",
            "--seq-start",
            str(first),
            "--step",
            step,
            "--target",
            LAB_TARGET,
            "--generator",
            gen,
            "--out",
            remote,
            "--timeout",
            f"{timeout_s:g}",
            "--max-in-flight",
            str(max_in_flight),
            "--deadline-s",
            f"{deadline:g}",
        ]
        try:
            host.put(body_file, remote_body)
            tally = run(host, Program.LOAD_AGENT, args, python=lab.python, timeout_s=deadline + 60)
            local = scratch / f"{step}-{gen}.jsonl"
            host.get(remote, local)
            text = read_user_text(
                local, f"generator {gen}'s records", max_bytes=MAX_RECORDS_BYTES, fix="run the step again"
            )
            records = parse_jsonl(text, local, RequestRecord)  # typed and bounded, line by line (runs.store)
            local.unlink()  # merged into the run's requests.jsonl below
            results[gen] = (records, tally)
        except BaseException as exc:  # re-raised below, after every generator finished
            errors[gen] = exc
        finally:
            try:
                host.run(f"rm -f {shlex.quote(remote)} {shlex.quote(remote_body)}", timeout_s=30, check=False)
            except Exception:  # the share's error (above) is the one worth reporting
                pass

    threads = [
        threading.Thread(target=one, args=(g, r, s), name=f"agent-{g}")
        for g, r, s in zip(names, rates, starts, strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        gen, exc = next(iter(errors.items()))
        raise RemoteError(f"generator {gen}: {exc}") from None
    records = merge_records([results[g][0] for g in names])
    return records, merge_tallies(step, [results[g][1] for g in names])
