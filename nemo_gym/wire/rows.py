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
    """The reward, and (NeMo Gym 0.7) whether the rollout should be left out of training and metrics
    (`mask_sample`, e.g. when the reward could not be computed) and why (`failure_kind`, `failure_reason`)."""

    reward: float
    mask_sample: bool = False
    failure_kind: str | None = None
    failure_reason: str | None = None


class BaseSeedSessionRequest(BaseModel):
    pass


class BaseSeedSessionResponse(BaseModel):
    pass
