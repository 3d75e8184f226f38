"""The JSON shapes Gym servers exchange, as pydantic v2 models that know nothing of HTTP.

`responses` holds the Responses API, `chat_completions` the Chat Completions API (both re-exported by
`nemo_gym.openai_utils` under their historical names), `rows` the task rows of `/run` and `/verify`.

Gym declares its own types instead of importing the OpenAI SDK's, so that validation does not change
when the SDK does, and so that the wire shapes stay exactly those NeMo Gym servers exchange.

Conventions every caller should know:

- Names ending in ``Param`` are ``TypedDict``s (plain dicts at runtime, like the SDK's request params);
  everything else is a pydantic model.
- Extra keys: the Responses request (`NeMoGymResponseCreateParamsNonStreaming`) forbids unknown top-level
  keys, as NeMo Gym does (a typo or a vLLM-only sampling key is a 422, not silently ignored). Items,
  content parts and response models allow extra keys, so fields a newer OpenAI or vLLM adds survive a
  round trip instead of being dropped. The Chat Completions request ignores unknown keys (see its
  docstring for why).
- Union members are chosen deterministically by discriminator functions (``type``, ``role`` and whether
  the token fields are present), never by pydantic's "smart" guessing: an item carrying
  ``prompt_token_ids``/``generation_token_ids``/``generation_log_probs`` always becomes its
  ``...ForTraining`` variant and keeps them.
- Constant fields that identify a shape (``type``, ``object``, ``role`` of an output message) have
  defaults for convenience but are always dumped, even with ``exclude_unset=True``, so a dump can be parsed
  back into the same class. Other defaults are not emitted under ``exclude_unset=True``:
  ``model_dump(mode="json", exclude_unset=True)`` reproduces exactly the JSON that was validated, and a
  plain ``model_dump(mode="json")`` gives the all-defaults shape NeMo Gym sends to ``/verify``.
- To validate a single item or an item list, use ``TypeAdapter(NeMoGymResponseInputItem)`` or
  ``TypeAdapter(NeMoGymResponseInput)``.
"""
