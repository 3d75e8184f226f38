"""citation_if: the gates in-process (every grammar, the known reward hacks), then /verify, the tool
catch-all and the deadline against real servers."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from nemo_gym.testing import (
    BASE_VERIFY_FIELDS,
    StartedServer,
    check_environment_config,
    function_call_item,
    message_item,
    post_json,
    read_jsonl,
    response_with,
    run_resources_server,
)
from resources_servers.citation_if.grammars import GRAMMARS, RESERVED_EXAMPLE_ID
from resources_servers.citation_if.scoring import TERMINAL_TOOL_RESPONSE, score
from resources_servers.citation_if.verifier import Verifier

FOLDER = Path(__file__).resolve().parents[1]
INSTANCE = "citation_if"
ROWS = read_jsonl(FOLDER / "data" / "example.jsonl")
ROLLOUTS = read_jsonl(FOLDER / "data" / "example_rollouts.jsonl")
A_RESPONSE = ROLLOUTS[0]["response"]
ROW = {
    key: value for key, value in ROWS[0].items() if key != "agent_ref"
}  # ascii_brackets, gold citation_k3p9
RUN_ONLY_KEYS = (
    "agent_ref",
    "_ng_environment_server",
    "_ng_result_type",
    "_ng_task_index",
    "_ng_rollout_index",
)
GOLD, OTHER, UNKNOWN = "citation_ab12", "citation_cd34", "citation_zz99"
ANSWER = "The bridge opened in 1932"


def verifier(**changes: object) -> dict:
    row = {
        "grammar": "ascii_brackets",
        "id_regex": "citation_[a-z0-9]{4}",
        "valid_id_set": [GOLD, OTHER],
        "expected_ids": [GOLD],
    }
    return Verifier.model_validate({**row, **changes}).settings()


def render(grammar: str, cited: str, claim: str = "the claim") -> str:
    """One well-formed citation of `cited` in `grammar`."""
    return {
        "cite_xml": f"<cite>{cited}</cite>",
        "ascii_brackets": f"[{cited}]",
        "claim_wrap_xml": f'<cite index="{cited}">{claim}</cite>',
        "fullwidth_brackets": f"\u3010{cited}\u3011",
        "ref_colon": f"[ref:{cited}]",
        "double_angle": f"<<{cited}>>",
        "web_brackets": f"[web:{cited}]",
        "paren_part": f"({cited})",
        "markdown_footnote": f"[^{cited}]",
        "curly_double": "{{" + cited + "}}",
        "angle_pipe": f"<ref|{cited}>",
    }[grammar]


def gate(text: str, function_calls: int = 0, **changes: object) -> str | None:
    reward, details = score(text, function_calls, verifier(**changes))
    assert (reward == 1.0) == (details["gate_failed"] is None)
    return details["gate_failed"]


# --- the gates (in-process) -------------------------------------------------------------------------


@pytest.mark.parametrize("grammar", sorted(GRAMMARS))
def test_every_grammar_accepts_its_own_citation_of_the_gold_id(grammar):
    assert gate(f"{ANSWER} {render(grammar, GOLD)}.", grammar=grammar) is None


@pytest.mark.parametrize("grammar", sorted(GRAMMARS))
def test_every_grammar_refuses_another_grammars_citation(grammar):
    other = "double_angle" if grammar != "double_angle" else "ref_colon"
    assert gate(f"{ANSWER} {render(other, GOLD)}.", grammar=grammar) == "malformed_attempt"


@pytest.mark.parametrize(
    ("text", "failed"),
    [
        (f"{ANSWER} [{GOLD}].", None),
        (f"{ANSWER} [{GOLD}] and [{OTHER}].", None),  # one over the gold, within the slack of 1
        ("", "structural"),
        ("   \n", "structural"),
        (f"[{GOLD}]", "no_answer"),
        (f"[{GOLD}] ... [{OTHER}] !", "no_answer"),
        (f"{ANSWER} [{GOLD}]. Sources: {GOLD}", "malformed_attempt"),  # a raw ID beside a good citation
        (f"{ANSWER} [{GOLD}, {OTHER}].", "malformed_attempt"),  # a list where the grammar takes one ID
        (f"{ANSWER} [{GOLD}]({GOLD}).", "malformed_attempt"),  # a markdown link is no citation
        (f"{ANSWER} [citation_12].", "malformed_attempt"),  # an ID of another scheme
        (f"{ANSWER}.", "must_cite"),
        (f"{ANSWER} [{UNKNOWN}].", "must_cite"),
        (f"{ANSWER} [{GOLD}] [{UNKNOWN}].", "no_hallucination"),
        (f"{ANSWER} [{RESERVED_EXAMPLE_ID}] [{GOLD}].", "no_hallucination"),  # the instructions' example
        (f"{ANSWER} [{OTHER}].", "correctness_missed_gold"),
    ],
)
def test_the_gates_in_cite_mode(text, failed):
    assert gate(text) == failed


def test_a_tool_call_fails_the_structural_gate_whatever_the_text():
    assert gate(f"{ANSWER} [{GOLD}].", function_calls=1) == "structural"


def test_over_citation_past_the_slack_fails_correctness():
    ids = ["citation_aa01", "citation_aa02", "citation_aa03"]
    text = ANSWER + "".join(f" [{cited}]" for cited in [GOLD, *ids])
    assert gate(text, valid_id_set=[GOLD, *ids]) == "correctness_over_cap"
    assert gate(text, valid_id_set=[GOLD, *ids], expected_slack=3) is None
    assert gate(text, valid_id_set=[GOLD, *ids], expected_ids=None) is None  # no correctness signal


def test_min_valid_citations_counts_distinct_valid_ids():
    assert gate(f"{ANSWER} [{GOLD}] [{GOLD}].", min_valid_citations=2) == "must_cite"
    assert gate(f"{ANSWER}.", min_valid_citations=0, expected_ids=None) is None


@pytest.mark.parametrize(
    ("text", "failed"),
    [
        (f"<cite>{GOLD},{OTHER}</cite> {ANSWER}", None),  # this grammar takes a list
        (f"<cite>{GOLD}</cite> {ANSWER} <cite>", "malformed_attempt"),  # a stray tag
        (f"<cite></cite> <cite>{GOLD}</cite> {ANSWER}", "malformed_attempt"),  # empty markup
        (f"<CITE>{GOLD}</CITE> {ANSWER}", "malformed_attempt"),
    ],
)
def test_the_xml_grammar_pairs_its_tags(text, failed):
    assert gate(text, grammar="cite_xml") == failed


def test_a_wrapped_claim_is_the_answer_and_an_empty_one_is_no_citation():
    claim = f'<cite index="{GOLD}">{ANSWER}</cite>'
    assert gate(claim, grammar="claim_wrap_xml") is None
    assert gate(f'<cite index="{GOLD}">.</cite>', grammar="claim_wrap_xml") == "no_answer"
    assert gate(f'{ANSWER} <cite index="{GOLD}">  </cite>', grammar="claim_wrap_xml") == "malformed_attempt"


def test_snippet_ids_must_name_the_gold_snippet():
    snippet = {"id_kind": "snippet", "id_regex": "citation_[a-z0-9]{4}:snippet_[0-9]+"}
    valid = {
        "valid_id_set": [f"{GOLD}:snippet_1", f"{GOLD}:snippet_2"],
        "expected_ids": [f"{GOLD}:snippet_1"],
    }
    assert gate(f"{ANSWER} [{GOLD}:snippet_1].", **snippet, **valid) is None
    assert gate(f"{ANSWER} [{GOLD}:snippet_2].", **snippet, **valid) == "correctness_missed_gold"
    assert gate(f"{ANSWER} [{GOLD}].", **snippet, **valid) == "malformed_attempt"


def test_a_row_without_id_regex_uses_the_numeric_scheme_of_its_kind():
    numeric = {"id_regex": None, "valid_id_set": ["citation_7"], "expected_ids": ["citation_7"]}
    assert gate(f"{ANSWER} [citation_7].", **numeric) is None
    assert gate(f"{ANSWER} [citation_7:snippet_1].", id_kind="snippet", **numeric) == "must_cite"


@pytest.mark.parametrize(
    ("text", "failed"),
    [
        (ANSWER + ".", None),
        (f"{ANSWER} [{GOLD}].", "no_cite"),
        (f"{ANSWER} ({GOLD})", "no_cite"),  # any ID-shaped token, in any grammar
        (f"{ANSWER} <cite>", "no_cite"),  # citation markup of a tag grammar even without an ID
        ("", "structural"),
    ],
)
def test_no_cite_mode_wants_no_citation_of_any_shape(text, failed):
    grammar = "cite_xml" if "<cite>" in text else "ascii_brackets"
    assert gate(text, mode="no_cite", grammar=grammar, expected_ids=None) == failed


def test_every_verdict_lists_what_was_cited():
    _, details = score(f"{ANSWER} [{GOLD}] [{UNKNOWN}].", 0, verifier())
    assert details["gate_failed"] == "no_hallucination"
    assert (details["parsed_ids"], details["cited_ids"], details["invalid_cited"]) == (
        [GOLD, UNKNOWN],
        [GOLD],
        [UNKNOWN],
    )


# --- /verify and the tool route ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    with run_resources_server(
        INSTANCE, tmp_path_factory.mktemp(INSTANCE), domain="instruction_following"
    ) as started:
        yield started


@pytest.fixture(scope="module")
def hurried_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartedServer]:
    workdir = tmp_path_factory.mktemp("citation_if_hurried")
    inner = {"domain": "instruction_following", "grading_timeout_seconds": 1.0}
    with run_resources_server("citation_if_hurried", workdir, implementation=INSTANCE, **inner) as started:
        yield started


async def verify(server: StartedServer, *items: dict, row: dict = ROW) -> dict:
    status, body = await post_json(
        server.url + "/verify", {**row, "response": response_with(*items, **A_RESPONSE)}
    )
    assert status == 200, body
    return body


async def test_a_compliant_reply_earns_1_and_the_answer_echoes_the_verifier(server):
    body = await verify(server, message_item("It is the Ljubljanica [citation_k3p9]."))
    assert body["reward"] == 1.0 and body["match_details"]["gate_failed"] is None
    assert body["verifier"] == ROW["verifier"]
    assert body["match_details"]["cited_ids"] == ["citation_k3p9"]
    assert set(body) == {*BASE_VERIFY_FIELDS, "verifier", "match_details"}


async def test_a_wrong_citation_earns_0_with_its_gate(server):
    body = await verify(server, message_item("It is the Ljubljanica [citation_w2md]."))
    assert body["reward"] == 0.0 and body["match_details"]["gate_failed"] == "correctness_missed_gold"
    assert body["mask_sample"] is False


async def test_a_reply_that_calls_a_tool_earns_0(server):
    body = await verify(
        server,
        message_item("Let me check. It is the Ljubljanica [citation_k3p9]."),
        function_call_item("web_search", {"query": "Ljubljana river"}),
    )
    assert body["reward"] == 0.0 and body["match_details"]["gate_failed"] == "structural"
    assert body["match_details"]["function_call_count"] == 1


async def test_messages_are_joined_by_lines(server):
    body = await verify(
        server, message_item("It is the Ljubljanica"), message_item("[citation_k3p9]", id="m2")
    )
    assert body["reward"] == 1.0


async def test_a_tool_call_reaching_the_server_gets_the_terminal_text(server):
    from nemo_gym.server_utils import request

    response = await request("POST", server.url + "/web_search", json={"query": "more"})
    assert response.status == 200 and (await response.read()).decode() == TERMINAL_TOOL_RESPONSE


@pytest.mark.parametrize(
    "change",
    [
        {"grammar": "emoji"},
        {"mode": "sometimes"},
        {"id_kind": "paragraph"},
        {"id_regex": "citation_[a-z"},
        {"valid_id_set": "citation_k3p9"},
        {"expected_ids": "citation_k3p9"},
        {"expected_slack": -1},
        {"min_valid_citations": "one"},
        {"type": "other_check"},
    ],
    ids=lambda change: next(iter(change)),
)
async def test_a_malformed_verifier_is_a_422_naming_it(server, change):
    row = {**ROW, "verifier": {**ROW["verifier"], **change}}
    status, body = await post_json(server.url + "/verify", {**row, "response": A_RESPONSE})
    assert status == 422 and ["body", "verifier"] in [error["loc"][:2] for error in body["detail"]]


async def test_a_row_without_a_verifier_is_a_422(server):
    row = {key: value for key, value in ROW.items() if key != "verifier"}
    status, body = await post_json(server.url + "/verify", {**row, "response": A_RESPONSE})
    assert status == 422 and ["body", "verifier"] in [error["loc"] for error in body["detail"]]


async def test_a_catastrophic_id_regex_is_masked_instead_of_hanging(hurried_server):
    row = {**ROW, "verifier": {**ROW["verifier"], "id_regex": "(a+)+b", "valid_id_set": ["ab"]}}
    body = await verify(hurried_server, message_item("Answer [" + "a" * 40 + "]"), row=row)
    assert body["reward"] == 0.0 and body["mask_sample"] is True and body["failure_kind"] == "verifier_error"
    # The server is still usable afterwards.
    after = await verify(hurried_server, message_item("The Ljubljanica [citation_k3p9]."))
    assert after["reward"] == 1.0, after


# --- recorded data, config --------------------------------------------------------------------------


@pytest.mark.parametrize("rollout", ROLLOUTS, ids=lambda rollout: rollout["verifier"]["grammar"])
async def test_recorded_rollouts_verify_to_their_recorded_answer(server, rollout):
    status, body = await post_json(server.url + "/verify", rollout)
    assert status == 200, body
    assert body == {key: value for key, value in rollout.items() if key not in RUN_ONLY_KEYS}


def test_the_recordings_pass_and_fail_different_gates():
    gates = [rollout["match_details"]["gate_failed"] for rollout in ROLLOUTS]
    assert gates == [None, None, "malformed_attempt", "correctness_missed_gold", None]
    assert [rollout["verifier"]["mode"] for rollout in ROLLOUTS].count("no_cite") == 1


def test_config_declares_the_environment_and_its_one_step_agent():
    _, _, agent = check_environment_config(FOLDER, INSTANCE, "instruction_following")
    assert agent["max_steps"] == 1
    assert {row["agent_ref"]["name"] for row in ROWS} == {"citation_if_simple_agent"}
    assert all(not GRAMMARS[row["verifier"]["grammar"]].holdout for row in ROWS)
