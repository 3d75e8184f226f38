"""math_advanced_calculations: calculator tools from an "alternate universe" where arithmetic is skewed.

Every tool looks familiar (add, sin, pi, ...) but computes something else (add adds an extra 1.2, sin is
the cosine, pi is e, ...), and the tool descriptions do not say so. A model can only get the values the
task asks for by actually calling the tools and chaining their outputs, never by doing the math itself,
which is what this environment trains. The reward checks that every asked-for value appeared among the
tool outputs of the rollout.
"""

import json

from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse

from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.envkit.pass_at_k_metrics import PassAtK
from resources_servers.math_advanced_calculations.calculator import (
    FUNCTIONS,
    CalculatorArguments,
    CalculatorResult,
    GroundTruth,
    calculate,
    tool_solutions,
)


class MathAdvancedCalculationsConfig(BaseResourcesServerConfig):
    pass


class MathVerifyRequest(BaseVerifyRequest):
    ground_truth: GroundTruth
    id: int | None = None
    depth: int | None = None
    breadth: int | None = None


class MathAdvancedCalculationsResourcesServer(SimpleResourcesServer):
    config: MathAdvancedCalculationsConfig
    pass_at_k = PassAtK()  # over the all-values-found reward
    key_metric_patterns = ("mean/*", "pass@1[avg-of-{k}]/*", "pass@{k}/*")

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        # Registered last, so the base routes (/verify, /seed_session, ...) take precedence.
        app.post("/{path}")(self.call_tool)
        return app

    async def call_tool(self, path: str, body: CalculatorArguments | None = None) -> CalculatorResult:
        """One route for all tools: the path names the function."""
        if path not in FUNCTIONS:
            raise HTTPException(status_code=404, detail="Function not found")
        arguments = body or CalculatorArguments()
        if missing := [name for name in FUNCTIONS[path][0] if getattr(arguments, name) is None]:
            problem = {"type": "missing", "msg": f"Field required by {path}"}
            detail = [{**problem, "loc": ["body", name]} for name in missing]
            return JSONResponse(status_code=422, content={"detail": detail})
        try:
            return CalculatorResult(solution=calculate(path, arguments))
        except (ArithmeticError, ValueError) as error:
            raise HTTPException(status_code=500, detail=f"{type(error).__name__}: {error}") from error

    async def verify(self, body: MathVerifyRequest) -> BaseVerifyResponse:
        """1.0 iff every ground-truth value appears, exactly, among the rollout's tool outputs."""
        seen = set(tool_solutions(body.response))
        reward = 1.0 if all(float(value) in seen for value in json.loads(body.ground_truth)) else 0.0
        return BaseVerifyResponse(
            **body.model_dump(include={"responses_create_params", "response"}), reward=reward
        )


if __name__ == "__main__":
    MathAdvancedCalculationsResourcesServer.run_webserver()
