"""`--anonymise`: workflow ids and names and node names replaced by a keyed hash, the instance's URL dropped.

The key is 32 random bytes made for one export and never written anywhere, so a name maps to the same hash
throughout one file (a node keeps its name across its workflow's nodes and timings, and `--scale NAME=...` takes
the hash) and to nothing anyone can reverse or match against another file. Node types, trigger kinds, schedule
rules, counts and times stay: they are what sizing needs, and they name no one.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from n8n_sizer.history.record import History, NodeInfo, NodeTime, WorkflowHistory


class Anonymiser:
    def __init__(self, key: bytes | None = None) -> None:
        self._key = key or secrets.token_bytes(32)

    def hash(self, kind: str, text: str, chars: int = 12) -> str:
        digest = hmac.new(self._key, f"{kind}\0{text}".encode(), hashlib.sha256).hexdigest()
        return f"{kind}-{digest[:chars]}"

    def workflow(self, w: WorkflowHistory) -> WorkflowHistory:
        def node(name: str) -> str:
            return self.hash("node", f"{w.id}\0{name}", 8)

        return w.model_copy(
            update={
                "id": self.hash("id", w.id),
                "name": self.hash("wf", f"{w.id}\0{w.name}"),
                "nodes": tuple(NodeInfo(**{**n.model_dump(), "name": node(n.name)}) for n in w.nodes),
                "edges": tuple((node(a), kind, o, node(b), i) for a, kind, o, b, i in w.edges),
                "node_timings": tuple(
                    NodeTime(
                        **{
                            **t.model_dump(),
                            "name": node(t.name),
                            "inside": None if t.inside is None else node(t.inside),
                        }
                    )
                    for t in w.node_timings
                ),
            }
        )

    def history(self, h: History) -> History:
        return h.model_copy(
            update={
                "anonymised": True,
                "read": h.read.model_copy(update={"instance": None}),
                "workflows": tuple(self.workflow(w) for w in h.workflows),
            }
        )
