"""What agent servers share: the steps of a rollout, agent sessions, single-turn episodes, coding-agent CLIs."""
