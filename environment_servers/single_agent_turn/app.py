"""single_agent_turn: NeMo Gym 0.7's typed episode around one agent turn (see README.md). The protocol lives
in the core (`nemo_gym.agents.single_agent_turn`), shared with single_agent_turn_legacy."""

from nemo_gym.agents.single_agent_turn import SingleAgentTurnEnvironmentServer

if __name__ == "__main__":
    SingleAgentTurnEnvironmentServer.run_webserver()
