"""The task rows of a rollout: what an agent's `/run` takes and what a resources server's `/verify` and
`/seed_session` exchange, free of any server code so datasets can be read without importing one."""

from pydantic import BaseModel

from nemo_gym.wire.responses import NeMoGymResponse, NeMoGymResponseCreateParamsNonStreaming


class BaseRunRequest(BaseModel):
    """A task row as sent to an agent's `/run`; the only required key is `responses_create_params`."""

    responses_create_params: NeMoGymResponseCreateParamsNonStreaming


class BaseVerifyRequest(BaseRunRequest):
    response: NeMoGymResponse


class BaseVerifyResponse(BaseVerifyRequest):
    reward: float


class BaseSeedSessionRequest(BaseModel):
    pass


class BaseSeedSessionResponse(BaseModel):
    pass
