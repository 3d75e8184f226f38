"""How Gym's servers talk HTTP: the one outbound client, deadlines, request limits, errors, sessions, in-process calls."""
