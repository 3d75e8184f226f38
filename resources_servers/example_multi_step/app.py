"""example_multi_step: look up the value of every synonym of the term a query implies, then submit them.

A multi-step tool-calling task: the model must pick the right term from a long list, call
`get_synonym_value` once per synonym (in listing order) and finish with one `extract_synonym_values` call.
The tools keep no state; `/verify` judges only the last submission found in the response, and reports
diagnostic fields that separate "wrong set" from "right set, wrong order" and from "used the term itself".
"""

import json

from fastapi import FastAPI, Request
from pydantic import BaseModel, Field, ValidationError

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.openai_utils import NeMoGymResponse

SUBMIT_TOOL = "extract_synonym_values"


class MultiStepConfig(BaseResourcesServerConfig):
    pass


class GetSynonymValueRequest(BaseModel):
    synonym: str


class GetSynonymValueResponse(BaseModel):
    synonym_value: int


class ExtractSynonymValuesRequest(BaseModel):
    synonym_values: list[int]


class ExtractSynonymValuesResponse(BaseModel):
    success: bool


class MultiStepVerifyRequest(BaseVerifyRequest):
    id: int
    # At least one value: an empty target makes the overlap fraction meaningless.
    expected_synonym_values: list[int] = Field(min_length=1)
    expected_synonyms: list[str]
    minefield_label: str
    minefield_label_value: int


class MultiStepVerifyResponse(BaseVerifyResponse):
    parsed_synonym_values: list[int]
    accuracy: bool
    set_overlap: float
    original_term_minefield_hit: bool
    order_instruction_following_failure: bool


def synonym_value(synonym: str) -> int:
    """A deterministic value the model cannot guess without calling the tool: the sum of code points."""
    return sum(ord(character) for character in synonym)


def submitted_values(response: NeMoGymResponse) -> list[int]:
    """The values of the last `extract_synonym_values` call; [] if there is none or it is malformed.

    A malformed submission (arguments that are not JSON, or not a list of integers as the tool route
    would accept) counts as submitting nothing rather than failing the whole verification.
    """
    calls = [item for item in response.output if item.type == "function_call" and item.name == SUBMIT_TOOL]
    if not calls:
        return []
    try:
        arguments = json.loads(calls[-1].arguments)
        return ExtractSynonymValuesRequest.model_validate(arguments).synonym_values
    except (ValueError, ValidationError):
        return []


class MultiStepResourcesServer(SimpleResourcesServer):
    config: MultiStepConfig

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        app.post("/get_synonym_value")(self.get_synonym_value)
        app.post(f"/{SUBMIT_TOOL}")(self.extract_synonym_values)
        return app

    async def get_synonym_value(self, body: GetSynonymValueRequest) -> GetSynonymValueResponse:
        return GetSynonymValueResponse(synonym_value=synonym_value(body.synonym))

    async def extract_synonym_values(self, body: ExtractSynonymValuesRequest) -> ExtractSynonymValuesResponse:
        """Only acknowledges: the submission is read back from the response at verification time."""
        return ExtractSynonymValuesResponse(success=True)

    async def verify(self, request: Request, body: MultiStepVerifyRequest) -> MultiStepVerifyResponse:
        """reward = 1.0 iff the submitted list equals the expected one, order included."""
        actual = submitted_values(body.response)
        expected = body.expected_synonym_values
        accuracy = actual == expected
        set_overlap = len(set(actual) & set(expected)) / len(expected)
        return MultiStepVerifyResponse(
            responses_create_params=body.responses_create_params,
            response=body.response,
            reward=float(accuracy),
            parsed_synonym_values=actual,
            accuracy=accuracy,
            set_overlap=set_overlap,
            original_term_minefield_hit=body.minefield_label_value in actual,
            order_instruction_following_failure=not accuracy and set_overlap == 1.0,
        )


if __name__ == "__main__":
    MultiStepResourcesServer.run_webserver()
