"""A row's `verifier`, validated: a malformed one is refused with a 422 before any scoring.

Kept apart from grammars.py and scoring.py so the worker processes that score replies never import
pydantic (a fresh worker must start well within the scoring deadline).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from resources_servers.citation_if.grammars import DEFAULT_ID_REGEX, GRAMMARS


class Verifier(BaseModel):
    """A row's `verifier`: what its answer must cite and how. Unknown keys are kept (build metadata)."""

    model_config = ConfigDict(extra="allow")

    type: Literal["citation_if"] = "citation_if"
    mode: Literal["cite", "no_cite"] = "cite"
    grammar: str
    id_kind: Literal["full_source", "snippet"] = "full_source"
    id_regex: str | None = None
    valid_id_set: list[str] = Field(default_factory=list)
    expected_ids: list[str] | None = None
    expected_slack: int = Field(default=1, ge=0)
    min_valid_citations: int = Field(default=1, ge=0)

    @field_validator("grammar")
    @classmethod
    def _a_known_grammar(cls, grammar: str) -> str:
        if grammar not in GRAMMARS:
            raise ValueError(f"unknown grammar {grammar!r}; known: {sorted(GRAMMARS)}")
        return grammar

    @field_validator("id_regex")
    @classmethod
    def _a_valid_pattern(cls, id_regex: str | None) -> str | None:
        if id_regex:
            try:
                re.compile(id_regex)
            except re.error as error:
                raise ValueError(f"id_regex is not a valid regular expression: {error}") from error
        return id_regex

    @property
    def row_id_regex(self) -> str:
        """The row's ID pattern: its `id_regex`, else the numeric default of its `id_kind`."""
        return self.id_regex or DEFAULT_ID_REGEX[self.id_kind]

    def settings(self) -> dict[str, Any]:
        """The fields scoring reads, as plain data (to hand to a worker process)."""
        return self.model_dump(include=set(type(self).model_fields))
