"""Running servers: the base class of each server kind, sockets and workers, the CPU pool, the model servers' dialects."""
