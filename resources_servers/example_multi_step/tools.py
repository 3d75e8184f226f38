"""The two tools of example_multi_step, which keep no state: the synonym lookup, and the submission
`/verify` reads back from the response."""

import json

from pydantic import BaseModel, ValidationError

from nemo_gym.openai_utils import NeMoGymResponse

SUBMIT_TOOL = "extract_synonym_values"


class GetSynonymValueRequest(BaseModel):
    synonym: str


class GetSynonymValueResponse(BaseModel):
    synonym_value: int


class ExtractSynonymValuesRequest(BaseModel):
    synonym_values: list[int]


class ExtractSynonymValuesResponse(BaseModel):
    success: bool


def synonym_value(synonym: str) -> int:
    """A deterministic value the model cannot guess without calling the tool: the sum of code points."""
    return sum(ord(character) for character in synonym)


async def get_synonym_value(body: GetSynonymValueRequest) -> GetSynonymValueResponse:
    return GetSynonymValueResponse(synonym_value=synonym_value(body.synonym))


async def extract_synonym_values(body: ExtractSynonymValuesRequest) -> ExtractSynonymValuesResponse:
    """Only acknowledges: the submission is read back from the response at verification time."""
    return ExtractSynonymValuesResponse(success=True)


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
