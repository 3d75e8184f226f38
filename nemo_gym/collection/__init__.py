"""Rollout collection (`gym collect`, `gym eval aggregate`, the trainer-facing RolloutCollectionHelper),
one job per module; `nemo_gym.rollout_collection` re-exports the names under their historical path.

`gym collect` works as a bounded pipeline: rows are read from the materialized inputs one at a time, at
most `num_samples_in_parallel` rollouts are in flight, and each result is appended to the output as one
whole line the moment it completes. Memory therefore does not grow with the dataset: the only per-row
state is a small on-disk ledger of task indices and finished (task, rollout) pairs.

A rollout that fails (HTTP error, deadline, connection, unusable answer) becomes a record in the failures
file with its class, message and attempt number; collection goes on. `resume_from_cache=true` runs
exactly the (task, rollout) pairs that have no result yet, even after a `kill -9`.

Files, for `output_jsonl_fpath = out/r.jsonl`:
    out/r_materialized_inputs.jsonl   every rollout to run (row + agent_ref + _ng_task_index/_ng_rollout_index)
    out/r.jsonl                       results, in completion order
    out/r_failures.jsonl              one line per failed attempt
    out/r_aggregate_metrics.json      per agent: agent_metrics, key_metrics, group_level_metrics

Modules:
    config        RolloutCollectionConfig, the settings of `gym collect`
    paths         the output files of one collection and the refusal to replace an earlier run's records
    records       the keys collection stamps on records, failure records and how often a rollout is tried
    ledger        per-row bookkeeping (task indices, finished pairs, failed attempts) in a temporary SQLite
    materialize   the materialized inputs: every (task, rollout) to run, written atomically
    pipeline      completed_in_any_order: a bounded number of awaitables in flight, results as they finish
    runner        RolloutRunner: one classified `/run` per row (what `gym collect` runs)
    routing       which agent runs a row: agent_ref, task_source, agent_map, fan_out
    environments  which environment server runs a row (NeMo Gym 0.7), its request body and flat result
    row_checks    rows that could never run, and tasks a replay has no recording of, found before serving
    trainer       NeMo Gym's RolloutCollectionHelper: run_examples / preprocess_examples for trainers
    progress      CollectionProgress (live counts) and CollectionSummary (the closing report, exit code)
    aggregation   `/aggregate_metrics` per agent over results and unresolved failures
    collector     RolloutCollector and collect_rollouts: `gym collect` end to end
    shards        ShardAggregationConfig and aggregate_shards: `gym eval aggregate`
"""
