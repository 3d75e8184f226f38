"""example_multi_step: look up the value of every synonym of the term a query implies, then submit them.

A multi-step tool-calling task: the model must pick the right term from a long list, call
`get_synonym_value` once per synonym (in listing order) and finish with one `extract_synonym_values` call.
The tools keep no state; `/verify` judges only the last submission found in the response, and reports
diagnostic fields that separate "wrong set" from "right set, wrong order" and from "used the term itself".
"""

from fastapi import FastAPI
from pydantic import Field

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from resources_servers.example_multi_step import tools


class MultiStepConfig(BaseResourcesServerConfig):
    pass


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


class MultiStepResourcesServer(SimpleResourcesServer):
    config: MultiStepConfig

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        app.post("/get_synonym_value")(tools.get_synonym_value)
        app.post(f"/{tools.SUBMIT_TOOL}")(tools.extract_synonym_values)
        return app

    async def verify(self, body: MultiStepVerifyRequest) -> MultiStepVerifyResponse:
        """reward = 1.0 iff the submitted list equals the expected one, order included."""
        actual = tools.submitted_values(body.response)
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
