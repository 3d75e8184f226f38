"""NeMo Gym's import path for tool grants; they live in `nemo_gym.wire.sessions`."""

from nemo_gym.wire.sessions import DirectHTTPToolAccess as DirectHTTPToolAccess
from nemo_gym.wire.sessions import MCPStreamableHTTPConnection as MCPStreamableHTTPConnection
from nemo_gym.wire.sessions import MCPToolAccess as MCPToolAccess
from nemo_gym.wire.sessions import ToolAccess as ToolAccess
