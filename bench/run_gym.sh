#!/usr/bin/env bash
# Launcher for our stack, following the harness's launcher contract (../shared/bench/README.md,
# "Measuring another implementation"):
#   run_gym.sh start [--wait]   start `gym run` in the background (own session) and return
#   run_gym.sh stop             stop exactly what `start` started (recorded PID and its session)
#   run_gym.sh status           print the recorded state
# Inputs (env): STATE_DIR, UPSTREAM_URL (http://127.0.0.1:21200/v1), AGENT_PORT (21100),
#   RESOURCES_PORT (21101), MODEL_PORT (21102), HEAD_PORT (21099), GYM_VENV (the project venv),
#   BENCH_PY (python for the harness's load.py, for --wait), GYM_BENCH_OVERRIDES (extra +key=value words).
# Outputs in $STATE_DIR: launch_ts, pids, agent_url, server.log.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
SCRATCH="${GYM_BENCH_SCRATCH:-${XDG_CACHE_HOME:-$HOME/.cache}/gym-bench}"
STATE_DIR="${STATE_DIR:-$SCRATCH/state/gym}"
UPSTREAM_URL="${UPSTREAM_URL:-http://127.0.0.1:21200/v1}"
AGENT_PORT="${AGENT_PORT:-21100}"
RESOURCES_PORT="${RESOURCES_PORT:-21101}"
MODEL_PORT="${MODEL_PORT:-21102}"
HEAD_PORT="${HEAD_PORT:-21099}"
GYM_VENV="${GYM_VENV:-$ROOT/.venv}"
GYM_PYTHON="$GYM_VENV/bin/python"
BENCH_PY="${BENCH_PY:-$GYM_PYTHON}"
HARNESS="${HARNESS:-$HERE/harness}"

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
session_pids() { ps -eo pid=,sid= | awk -v s="$1" '$2==s {print $1}'; }

start() {
  [[ -x "$GYM_PYTHON" ]] || { echo "no $GYM_PYTHON: run 'make test' or 'make bench' once to build the venv" >&2; exit 2; }
  if [[ -f "$STATE_DIR/pids" ]] && kill -0 "$(head -1 "$STATE_DIR/pids")" 2>/dev/null; then
    echo "already running (pid $(head -1 "$STATE_DIR/pids")); run '$0 stop' first" >&2; exit 2
  fi
  for p in "$HEAD_PORT" "$AGENT_PORT" "$RESOURCES_PORT" "$MODEL_PORT"; do
    if port_busy "$p"; then echo "port $p on 127.0.0.1 is already in use" >&2; exit 2; fi
  done
  mkdir -p "$STATE_DIR"
  rm -f "$STATE_DIR/pids" "$STATE_DIR/launch_ts" "$STATE_DIR/agent_url"
  echo "http://127.0.0.1:$AGENT_PORT" > "$STATE_DIR/agent_url"
  cd "$ROOT"
  export PYTHONUNBUFFERED=1 NO_PROXY="127.0.0.1,localhost" no_proxy="127.0.0.1,localhost"
  date +%s.%N > "$STATE_DIR/launch_ts"
  # setsid: the launcher leads a session holding all its servers, which is what the harness measures.
  # shellcheck disable=SC2086
  setsid "$GYM_VENV/bin/gym" run "+config_paths=[bench/gym_bench.yaml]" \
      "+policy_base_url=$UPSTREAM_URL" "+policy_api_key=dummy" "+policy_model_name=fake-model" \
      "+head_server.host=127.0.0.1" "+head_server.port=$HEAD_PORT" \
      "+example_single_tool_call.resources_servers.example_single_tool_call.port=$RESOURCES_PORT" \
      "+example_single_tool_call_simple_agent.responses_api_agents.simple_agent.port=$AGENT_PORT" \
      "+policy_model.responses_api_models.openai_model.port=$MODEL_PORT" \
      ${GYM_BENCH_OVERRIDES:-} \
      > "$STATE_DIR/server.log" 2>&1 < /dev/null &
  echo $! > "$STATE_DIR/pids"
  echo "gym started: pid $(cat "$STATE_DIR/pids"), agent http://127.0.0.1:$AGENT_PORT, log $STATE_DIR/server.log"
  if [[ "${1:-}" == "--wait" ]]; then
    "$BENCH_PY" "$HARNESS/load.py" wait-ready --agent-url "http://127.0.0.1:$AGENT_PORT" \
        --since-file "$STATE_DIR/launch_ts" --timeout 120 \
        --data "$HARNESS/data/example_single_tool_call.jsonl" --pids-file "$STATE_DIR/pids"
  fi
}

stop() {
  [[ -f "$STATE_DIR/pids" ]] || { echo "nothing recorded in $STATE_DIR/pids"; return 0; }
  local pid left
  pid="$(head -1 "$STATE_DIR/pids")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true   # gym run's own shutdown: children first, then itself
    for _ in $(seq 1 75); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  fi
  left="$(session_pids "$pid")"
  if [[ -n "$left" ]]; then
    kill -TERM $left 2>/dev/null || true
    for _ in $(seq 1 25); do [[ -z "$(session_pids "$pid")" ]] && break; sleep 0.2; done
    left="$(session_pids "$pid")"
    [[ -n "$left" ]] && kill -KILL $left 2>/dev/null || true
  fi
  for _ in $(seq 1 50); do port_busy "$AGENT_PORT" || port_busy "$HEAD_PORT" || break; sleep 0.2; done
  rm -f "$STATE_DIR/pids"
  echo "gym stopped"
}

status() {
  for f in pids launch_ts agent_url; do [[ -f "$STATE_DIR/$f" ]] && echo "$f: $(cat "$STATE_DIR/$f")"; done
  if [[ -f "$STATE_DIR/pids" ]]; then ps -o pid,ppid,sid,rss,etime,args -s "$(head -1 "$STATE_DIR/pids")" | cut -c1-160; fi
}

case "${1:-}" in
  start) shift; start "$@" ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start [--wait] | stop | status" >&2; exit 2 ;;
esac
