"""One base for the package's records: frozen pydantic models that refuse fields they do not declare."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    """Immutable once built, and a field it does not declare is an error (a typo in a user's file fails loudly
    instead of being dropped)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
