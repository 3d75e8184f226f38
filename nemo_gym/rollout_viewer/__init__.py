"""Looking at stored rollouts: `gym view` (a local page, or one HTML file) and `gym show` (the terminal)."""
