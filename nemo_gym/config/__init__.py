"""Config of a Gym deployment: its models (free of any HTTP layer) and the modules that load, check and
complete a merged config. `nemo_gym.config.global_config` and `nemo_gym.config_types` re-export the public names."""
