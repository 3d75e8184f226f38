"""Starting a deployment: the launcher, its child processes, co-hosting, preflight checks, Ray shards."""
