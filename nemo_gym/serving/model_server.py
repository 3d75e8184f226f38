"""Model servers are OpenAI-compatible façades (`/v1/responses`, `/v1/chat/completions`) over an upstream.

A server implements `responses()` and `chat_completions()`; the base class serves them on their routes,
validating the body with the type the server's method declares (so a server may accept more fields), and
serves each with `stream: true` as Server-Sent Events made from the buffered answer (see
`nemo_gym.serving.model_streaming`, `nemo_gym.serving.responses_streaming`, `nemo_gym.serving.chat_streaming`).
"""

from __future__ import annotations

import functools
import inspect
import logging
import typing
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
from fastapi import Body as Body
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.responses import Response

from nemo_gym.config.server_instances import BaseRunServerInstanceConfig
from nemo_gym.config.token_id_capture import token_id_capture_config
from nemo_gym.http.errors import exception_to_error_body
from nemo_gym.http.request_bodies import document_json_bodies
from nemo_gym.serving.anthropic_converter import AnthropicConverter, anthropic_error_body
from nemo_gym.serving.chat_streaming import (
    chat_error_event,
    sanitize_streaming_chat_body,
    synthesize_chat_completion_sse,
)
from nemo_gym.serving.model_streaming import DEFAULT_KEEPALIVE_INTERVAL_S, stream_when_ready
from nemo_gym.serving.responses_streaming import (
    sanitize_streaming_responses_body,
    synthesize_responses_failure_sse,
    synthesize_responses_sse,
    validate_streaming_responses_params,
)
from nemo_gym.serving.servers import SimpleServer, new_app
from nemo_gym.serving.token_capture import (
    CaptureFiles,
    TokenCaptureMiddleware,
    captured_routes,
    keep_buffered_answer,
)
from nemo_gym.wire.anthropic import AnthropicCountTokensRequest, AnthropicMessagesRequest
from nemo_gym.wire.chat_completions import (
    NeMoGymChatCompletion,
    NeMoGymChatCompletionCreateParamsNonStreaming,
)
from nemo_gym.wire.responses import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming
from nemo_gym.wire.validation_errors import describe_validation_error

logger = logging.getLogger("nemo_gym.token_capture")

Handler = Callable[..., Awaitable[Any]]
RESPONSES_PARAMS = NeMoGymResponseCreateParamsNonStreaming
CHAT_PARAMS = NeMoGymChatCompletionCreateParamsNonStreaming
ANTHROPIC = AnthropicConverter()
# How much of an inner error's body an error event quotes.
MAX_CAUSE_CHARS = 1000


class NonGeneratingRequest(BaseModel):
    """A route of this server whose answer carries no policy tokens, so training-token capture skips it."""

    model_config = ConfigDict(extra="forbid")

    method: str
    path: str


class BaseResponsesAPIModelConfig(BaseRunServerInstanceConfig):
    token_id_capture_non_generating_requests: list[NonGeneratingRequest] = []
    stream_keepalive_interval_s: float = Field(
        default=DEFAULT_KEEPALIVE_INTERVAL_S,
        gt=0,
        description="with `stream: true`, how long the first byte waits for the answer, and the interval "
        "of `: keep-alive` comments after that",
    )


class AnsweredWith(Exception):
    """A server method answered with a ready HTTP response that is an error: it goes to the client as is."""

    def __init__(self, response: Response) -> None:
        super().__init__(
            f"HTTP {response.status_code}: {bytes(response.body)[:500].decode(errors='replace')}"
        )
        self.response = response


class SimpleResponsesAPIModel(SimpleServer):
    config: BaseResponsesAPIModelConfig

    def setup_webserver(self) -> FastAPI:
        app = new_app()
        self.setup_session_middleware(app)
        self.setup_token_capture(app)
        app.add_api_route(
            "/v1/chat/completions", self.chat_completions_dispatch, methods=["POST"], response_model=None
        )
        app.add_api_route("/v1/responses", self.responses_dispatch, methods=["POST"], response_model=None)
        app.add_api_route("/v1/messages", self.messages, methods=["POST"], response_model=None)
        app.add_api_route(
            "/v1/messages/count_tokens", self.count_tokens, methods=["POST"], response_model=None
        )
        document_json_bodies(
            app,
            {
                "/v1/chat/completions": body_model(self.chat_completions, CHAT_PARAMS),
                "/v1/responses": body_model(self.responses, RESPONSES_PARAMS),
                "/v1/messages": AnthropicMessagesRequest,
                "/v1/messages/count_tokens": AnthropicCountTokensRequest,
            },
        )
        return app

    def setup_token_capture(self, app: FastAPI) -> None:
        """With the deployment's `token_id_capture` enabled, record the calls that ask for capture."""
        capture = token_id_capture_config(self.server_client.global_config_dict)
        if not capture.enabled:
            return
        directory = Path(capture.dir)
        directory.mkdir(parents=True, exist_ok=True)  # an unwritable place fails the start, not each call
        skipped = [
            (route.method, route.path) for route in self.config.token_id_capture_non_generating_requests
        ]
        files = CaptureFiles(directory, captured_routes(skipped))
        app.add_middleware(TokenCaptureMiddleware, files=files, server_label=self.server_label)
        logger.info(
            "%s: training-token capture records into %s/<rollout key>.jsonl%s",
            self.config.name,
            directory,
            " (call indices count per worker process)" if (self.config.num_workers or 1) > 1 else "",
        )

    async def chat_completions(
        self, request: Request, body: NeMoGymChatCompletionCreateParamsNonStreaming
    ) -> NeMoGymChatCompletion:
        raise NotImplementedError(f"{type(self).__name__} must implement chat_completions()")

    async def responses(
        self, request: Request, body: NeMoGymResponseCreateParamsNonStreaming
    ) -> NeMoGymResponse:
        raise NotImplementedError(f"{type(self).__name__} must implement responses()")

    # ---- routes: the server's methods, plain or streamed -------------------------------------------------

    async def responses_dispatch(self, request: Request, body: dict[str, Any] = Body()) -> Any:
        """`POST /v1/responses`: `responses()` with the strict params; with `stream: true`, the streaming
        dialect made into them and the answer served as Responses events."""
        if body.get("stream") is not True:
            params = validated_body(self.responses, body, RESPONSES_PARAMS)
            return json_answer(await call_method(self.responses, request, params))
        declared = body_model(self.responses, RESPONSES_PARAMS) or RESPONSES_PARAMS
        cleaned, names = sanitize_streaming_responses_body(body, declared)
        try:
            params = validate_streaming_responses_params(cleaned, declared)
        except ValidationError as error:
            raise request_validation_error(error) from None
        return await self._stream(
            self.buffered_answer(self.responses, request, params),
            lambda answer: synthesize_responses_sse(answer, names),
            self._responses_failure,
        )

    async def chat_completions_dispatch(self, request: Request, body: dict[str, Any] = Body()) -> Any:
        """`POST /v1/chat/completions`: `chat_completions()` with the strict params; with `stream: true`
        (the boolean only), the answer served as `chat.completion.chunk` events."""
        if body.get("stream") is not True:
            params = validated_body(self.chat_completions, body, CHAT_PARAMS)
            return json_answer(await call_method(self.chat_completions, request, params))
        cleaned, include_usage = sanitize_streaming_chat_body(body)
        params = validated_body(self.chat_completions, cleaned, CHAT_PARAMS)
        return await self._stream(
            self.buffered_answer(self.chat_completions, request, params),
            lambda answer: synthesize_chat_completion_sse(answer, include_usage),
            lambda error: iter([chat_error_event(*self._status_and_message(error))]),
        )

    async def messages(self, request: Request, body: dict[str, Any] = Body()) -> Response:
        """`POST /v1/messages` (Anthropic Messages): the request made into Responses params, answered by
        `responses()`, the answer made into an Anthropic message (or its event stream). Errors have
        Anthropic's shape."""
        try:
            anthropic = AnthropicMessagesRequest.model_validate(body)
            params = ANTHROPIC.anthropic_request_to_responses(anthropic)
            declared = body_model(self.responses, RESPONSES_PARAMS) or RESPONSES_PARAMS
            if not isinstance(params, declared):  # a server that takes more than the standard params
                params = declared.model_validate(params.model_dump(mode="json", exclude_unset=True))
        except ValidationError as error:
            return self._anthropic_error(400, f"invalid request: {describe_validation_error(error)}")
        answer = self.buffered_answer(self.responses, request, params)
        try:
            if not anthropic.stream:
                message = ANTHROPIC.responses_to_anthropic_response(await answer, anthropic.model)
                return Response(orjson.dumps(message), media_type="application/json")
            return await stream_when_ready(
                answer,
                lambda done: ANTHROPIC.anthropic_response_to_sse(
                    ANTHROPIC.responses_to_anthropic_response(done, anthropic.model)
                ),
                lambda error: iter([ANTHROPIC.error_event(self._anthropic_error_body(error))]),
                self.config.stream_keepalive_interval_s,
            )
        except Exception as error:  # every failure is answered in Anthropic's shape
            details = self._anthropic_error_body(error)
            return self._anthropic_error(details["error"]["status"], details["error"]["message"])

    async def count_tokens(self, request: Request, body: dict[str, Any] = Body()) -> Response:
        """`POST /v1/messages/count_tokens`: an estimate from the request's size (see AnthropicConverter)."""
        try:
            counted = ANTHROPIC.count_tokens(AnthropicCountTokensRequest.model_validate(body))
        except ValidationError as error:
            return self._anthropic_error(400, f"invalid request: {describe_validation_error(error)}")
        return Response(orjson.dumps(counted), media_type="application/json")

    def _anthropic_error_body(self, error: BaseException) -> dict[str, Any]:
        status, message = self._status_and_message(error)
        return anthropic_error_body(status, message, self.server_label)

    def _anthropic_error(self, status: int, message: str) -> Response:
        body = orjson.dumps(anthropic_error_body(status, message, self.server_label))
        return Response(body, status_code=status, media_type="application/json")

    async def buffered_answer(
        self, method: Handler, request: Request, params: BaseModel | None
    ) -> dict[str, Any]:
        """A server method's whole answer as JSON, kept for training-token capture; an error answer raises."""
        answer = await call_method(method, request, params)
        if isinstance(answer, Response):
            if answer.status_code >= 400:
                raise AnsweredWith(answer)
            answer = orjson.loads(answer.body)
        elif isinstance(answer, BaseModel):
            answer = answer.model_dump(mode="json", by_alias=True)
        keep_buffered_answer(request.scope, answer)
        return answer

    async def _stream(
        self,
        answer: Awaitable[dict[str, Any]],
        render: Callable[[dict[str, Any]], Iterator[bytes]],
        render_failure: Callable[[BaseException], Iterator[bytes]],
    ) -> Response:
        try:
            return await stream_when_ready(
                answer, render, render_failure, self.config.stream_keepalive_interval_s
            )
        except AnsweredWith as error:
            return error.response

    def _status_and_message(self, error: BaseException) -> tuple[int, str]:
        if isinstance(error, AnsweredWith):
            return error.response.status_code, str(error)
        details = exception_to_error_body(error, self.server_label)["error"]
        cause = f" ({orjson.dumps(details['cause']).decode()[:MAX_CAUSE_CHARS]})" if details["cause"] else ""
        return details["status"], details["message"] + cause

    def _responses_failure(self, error: BaseException) -> Iterator[bytes]:
        status, message = self._status_and_message(error)
        code = "invalid_request" if 400 <= status < 500 else "server_error"
        return synthesize_responses_failure_sse(f"HTTP {status}: {message}", code=code)


def body_model(method: Handler, default: type[BaseModel]) -> type[BaseModel] | None:
    """The body type a server method declares (None when it takes no body)."""
    return _declared_body(getattr(method, "__func__", method), default)


# What a method takes is looked up once per method, not on every call (resolving annotations is slow).
@functools.cache
def _declared_body(function: Handler, default: type[BaseModel]) -> type[BaseModel] | None:
    if "body" not in _parameters(function):
        return None
    try:
        declared = typing.get_type_hints(function).get("body", default)
    except (NameError, TypeError):  # an annotation that cannot be resolved here
        return default
    return declared if isinstance(declared, type) and issubclass(declared, BaseModel) else default


@functools.cache
def _parameters(function: Handler) -> frozenset[str]:
    return frozenset(inspect.signature(function).parameters)


def validated_body(method: Handler, body: dict[str, Any], default: type[BaseModel]) -> BaseModel | None:
    """`body` as the type `method` declares (`default` when it declares none), or FastAPI's 422 (locations
    under `body`); None for a method that takes no body."""
    model = body_model(method, default)
    if model is None:
        return None
    try:
        return model.model_validate(body)
    except ValidationError as error:
        raise request_validation_error(error) from None


def request_validation_error(error: ValidationError) -> RequestValidationError:
    return RequestValidationError(
        [{**problem, "loc": ("body", *problem["loc"])} for problem in error.errors(include_url=False)]
    )


def json_answer(answer: Any) -> Any:
    """A model answer as a JSON response written by orjson (as NeMo Gym 0.7); a ready response as is."""
    if isinstance(answer, BaseModel):
        return Response(
            orjson.dumps(answer.model_dump(mode="json", by_alias=True)), media_type="application/json"
        )
    return answer


async def call_method(method: Handler, request: Request, body: BaseModel | None) -> Any:
    """Call a server method with what it takes (`request`, `body`, or both)."""
    taken = _parameters(getattr(method, "__func__", method))
    arguments: dict[str, Any] = {}
    if "request" in taken:
        arguments["request"] = request
    if "body" in taken:
        arguments["body"] = body
    return await method(**arguments)
