"""What an environment author builds on: judging, grading helpers, sandboxes, test helpers."""
