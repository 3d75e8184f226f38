#!/usr/bin/env bash
# bench/run_gym.sh with one process per server (the default placement of `gym run`), for comparison.
exec env GYM_BENCH_OVERRIDES="+colocate=false ${GYM_BENCH_OVERRIDES:-}" "$(dirname "${BASH_SOURCE[0]}")/run_gym.sh" "$@"
