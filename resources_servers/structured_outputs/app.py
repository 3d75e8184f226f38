"""structured_outputs: reward an answer that is JSON valid against the JSON Schema the task row carries.

The answer is the response's output text (or the last ```json block in it); the schema is the row's
`schema_str`. Parsing and validation run in the CPU pool with a deadline: a schema `pattern` is a regex
applied to model text, so a hostile answer could otherwise stall the server.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, ConfigDict, Field

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.envkit.pass_at_k_metrics import PassAtK
from nemo_gym.http.errors import GymError
from nemo_gym.serving.cpu_pool import run_cpu_bound
from resources_servers.structured_outputs.grading import Grade, grade


class StructuredOutputsConfig(BaseResourcesServerConfig):
    strictify_schema: bool = True
    extract_from_code_fence: bool = True
    max_answer_chars: int = Field(default=200_000, gt=0)
    max_json_depth: int = Field(default=64, gt=0)


class StructuredOutputsVerifyRequest(BaseVerifyRequest):
    """Other row fields (ids, `schema_fields_count`, ...) are kept and echoed in the answer."""

    model_config = ConfigDict(extra="allow")

    # Older NeMo Gym rows call the field `schema`.
    schema_str: str = Field(validation_alias=AliasChoices("schema_str", "schema"))
    schema_type: Literal["json"] = "json"


class StructuredOutputsVerifyResponse(BaseVerifyResponse):
    model_config = ConfigDict(extra="allow")

    schema_str: str
    schema_type: str
    parsed_ok: bool
    schema_valid: bool
    validation_error: str | None


class StructuredOutputsResourcesServer(SimpleResourcesServer):
    config: StructuredOutputsConfig
    pass_at_k = PassAtK()  # how often some of k rollouts gives schema-valid JSON
    key_metric_patterns = ("mean/*", "pass@1[avg-of-{k}]/*", "pass@{k}/*")

    async def verify(self, body: StructuredOutputsVerifyRequest) -> StructuredOutputsVerifyResponse:
        """reward 1.0 iff the answer parses as JSON and validates against the schema."""
        result = await self._grade(body.schema_str, body.response.output_text)
        if result.schema_problem is not None:
            raise GymError(422, "invalid_row", f"schema_str: {result.schema_problem}")
        row = body.model_dump(exclude={"reward", "parsed_ok", "schema_valid", "validation_error"})
        return StructuredOutputsVerifyResponse(
            **row,
            reward=1.0 if result.schema_valid else 0.0,
            parsed_ok=result.parsed_ok,
            schema_valid=result.schema_valid,
            validation_error=result.validation_error,
        )

    async def _grade(self, schema_str: str, answer: str) -> Grade:
        config = self.config
        return await run_cpu_bound(
            grade,
            schema_str,
            answer,
            config.strictify_schema,
            config.extract_from_code_fence,
            config.max_answer_chars,
            config.max_json_depth,
            timeout_s=config.grading_timeout_s,
            on_timeout=Grade(False, False, f"grading exceeded {config.grading_timeout_s} s"),
        )


if __name__ == "__main__":
    StructuredOutputsResourcesServer.run_webserver()
