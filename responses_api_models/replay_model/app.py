"""replay_model: a model server that answers from recorded rollouts instead of calling an LLM.

Each line of a rollouts JSONL file (what `gym eval run` writes) holds a task's `responses_create_params`
and the recorded `response`, whose `output` is the whole trajectory: model items (messages, function
calls, reasoning) interleaved with the items the environment added (tool outputs, user turns). Given a
request whose `input` is a recording's input followed by a prefix of that trajectory, the server answers
with the next model turn of the recording. This gives offline demos (no key), deterministic regression
tests of environments and re-verification of stored rollouts.

Items are compared in a normalised form (normalise.py), so formatting that a tool, an agent or a JSON
serialiser may change (spacing of JSON, string vs list content, ids, statuses) does not matter. All
recordings are read at startup (recordings.py) into a trie keyed by normalised items (index.py), so a
lookup costs one dict access per request item, whatever the number of recordings.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from fastapi import FastAPI, Request, Response
from pydantic import Field, PrivateAttr, field_validator

from nemo_gym.base_responses_api_model import BaseResponsesAPIModelConfig, SimpleResponsesAPIModel
from nemo_gym.http.errors import error_body
from nemo_gym.openai_utils import NeMoGymResponseCreateParamsNonStreaming
from responses_api_models.replay_model.index import Miss, ReplayIndex, turn_response
from responses_api_models.replay_model.normalise import normalise_input
from responses_api_models.replay_model.recordings import load_index

logger = logging.getLogger("replay_model")


class ReplayModelConfig(BaseResponsesAPIModelConfig):
    rollouts_jsonl_fpath: list[str] = Field(
        description="rollouts JSONL file(s); relative paths are tried from the current directory, "
        "then from the repository root"
    )

    @field_validator("rollouts_jsonl_fpath", mode="before")
    @classmethod
    def _one_path_is_a_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class ReplayModel(SimpleResponsesAPIModel):
    config: ReplayModelConfig

    _index: ReplayIndex | None = PrivateAttr(default=None)

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        self._index = load_index(self.config.rollouts_jsonl_fpath)
        logger.info(
            "%s: %d recording(s) from %s",
            self.server_label,
            len(self._index.recordings),
            ", ".join(self.config.rollouts_jsonl_fpath),
        )
        return app

    @property
    def index(self) -> ReplayIndex:
        if self._index is None:
            self._index = load_index(self.config.rollouts_jsonl_fpath)
        return self._index

    async def responses(self, request: Request, body: NeMoGymResponseCreateParamsNonStreaming) -> Response:
        """The next recorded model turn (`model` is ignored); 404/409 with the differing item otherwise.

        Answers are sent as recorded (not re-serialised through the response model) so that the replayed
        items are byte-for-byte the stored ones.
        """
        request_input = body.model_dump(mode="json", exclude_unset=True)["input"]
        found = self.index.lookup(normalise_input(request_input, body.instructions), body.metadata)
        if isinstance(found, Miss):
            logger.warning("%s: %s", self.server_label, found.message)
            return self._error(found.status, found.error_type, found.message, found.cause)
        return Response(orjson.dumps(turn_response(found)), media_type="application/json")

    async def chat_completions(self, request: Request) -> Response:
        """Not replayed: recordings are Responses API trajectories, and a chat transcript loses the item
        boundaries (reasoning, call ids) the matching relies on. A 404, as for a path this server lacks:
        the request is fine, it went to the wrong route (a 5xx would look like a server fault)."""
        message = (
            "replay_model only replays Responses API recordings: POST /v1/responses instead "
            "(SimpleAgent and the other Gym agents already do)"
        )
        return self._error(404, "not_replayed", message)

    def _error(self, status: int, error_type: str, message: str, cause: Any = None) -> Response:
        body = error_body(error_type, status, message, self.server_label, cause)
        return Response(orjson.dumps(body), status_code=status, media_type="application/json")


if __name__ == "__main__":
    ReplayModel.run_webserver()
