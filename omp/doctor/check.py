"""One line of `omp doctor`'s report: a named check, ok | warn | fail, and the fix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok | warn | fail
    message: str
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "message": self.message, "fix": self.fix}
