"""GdpPdfAgent over HTTP against the shipped gdp_pdf environment: the environment, its judge and the policy
(both openai_model) and the agent are real server processes on 127.0.0.1; the scripted upstream (the one
test double) plays the policy (answers, or refusals of an oversized request) and the judge. The document is a
PDF made here with pymupdf and rendered once by the agent's prepare.py."""

from __future__ import annotations

import base64
import io
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import orjson
import pymupdf
import pytest
import yaml
from PIL import Image

from nemo_gym.http.client import get_response_json, request
from nemo_gym.testing import (
    JUDGE_MODEL_REF,
    ScriptedJudge,
    instance_config,
    read_jsonl,
    run_instance,
    run_scripted_judge,
)
from responses_api_agents.gdp_pdf_agent.prepare import prepare_document
from tests.upstream_script import ScriptedUpstream, assistant_message, fresh_model

ENV = Path(__file__).resolve().parents[3] / "resources_servers" / "gdp_pdf"
ENV_SETTINGS = yaml.safe_load((ENV / "configs" / "gdp_pdf.yaml").read_text())["gdp_pdf"]["resources_servers"][
    "gdp_pdf"
]
INLINE_ROW = read_jsonl(ENV / "data" / "example.jsonl")[1]
DOCUMENT_ROWS = read_jsonl(ENV / "data" / "example_documents.jsonl")
PAIRING = yaml.safe_load((ENV / "configs" / "gdp_pdf_agent.yaml").read_text())
SHIPPED_AGENT = PAIRING["gdp_pdf_agent"]["responses_api_agents"]["gdp_pdf_agent"]
PAGES = ("Lease, 14 Elm Street. Rent: USD 2,150 per month.", "Termination: 60 days' written notice.")
PAGE_PT = (420, 300)
QUESTION = "What is the monthly rent and how much notice ends the lease?"
ANSWER = "USD 2,150 a month; 60 days' notice."
ROW = {
    "responses_create_params": {
        "input": [{"role": "user", "content": [{"type": "input_text", "text": QUESTION}]}]
    },
    "verifier_metadata": {
        "task_id": "lease",
        "task_prompt": QUESTION,
        "domain": "Real Estate",
        "document_manifest": "lease/manifest.json",
        "rubric_criteria": [
            {"id": "rent", "criterion": "States USD 2,150."},
            {"id": "notice", "criterion": "60 days."},
        ],
    },
}
TOO_LONG = {
    "status": 400,
    "body": {"error": {"message": "This model's maximum context length is 8192 tokens."}},
}


@dataclass
class Stack:
    agent_url: str
    shipped_url: str
    policy: str
    upstream: ScriptedUpstream
    judge: ScriptedJudge
    seen: int = 0

    def script(self, *steps: dict | str, judge: tuple[str, ...] = ()) -> None:
        self.upstream.clear(self.policy)
        self.seen = len(self.upstream.requests(self.policy))
        self.upstream.script(
            self.policy, [{"output": [assistant_message(s)]} if isinstance(s, str) else s for s in steps]
        )
        self.judge.script(*judge)

    def policy_requests(self) -> list[dict]:
        return [entry["body"] for entry in self.upstream.requests(self.policy)[self.seen :]]


@pytest.fixture(scope="module")
def stack(scripted_upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("gdp_pdf_agent")
    documents = workdir / "documents"
    pdf = workdir / "lease.pdf"
    with pymupdf.open() as document:
        for text in PAGES:
            document.new_page(width=PAGE_PT[0], height=PAGE_PT[1]).insert_text((24, 32), text, fontsize=9)
        document.save(pdf)
    prepare_document(pdf, documents / "lease")
    policy = fresh_model("reader")
    with ExitStack() as servers:
        judge = servers.enter_context(run_scripted_judge(scripted_upstream, workdir))
        config = {
            **judge.config,
            "gdp_pdf": instance_config("resources_servers", "gdp_pdf", **{**ENV_SETTINGS, "judge_model_server": JUDGE_MODEL_REF}),
            "policy_model": instance_config(
                "responses_api_models", "openai_model", openai_base_url=scripted_upstream.base_url,
                openai_api_key="sk-reader-test", openai_model=policy, max_retries=1,
            ),
        }  # fmt: skip
        for name, server_type, folder in (
            ("gdp_pdf", "resources_servers", "gdp_pdf"),
            ("policy_model", "responses_api_models", "openai_model"),
        ):
            started = servers.enter_context(run_instance(config, name, workdir))
            config[name][server_type][folder]["port"] = started.port
        config["agent"] = instance_config(
            "responses_api_agents", "gdp_pdf_agent", max_steps=1, documents_base_dir=str(documents),
            resources_server={"type": "resources_servers", "name": "gdp_pdf"},
            model_server={"type": "responses_api_models", "name": "policy_model"}, rollout_deadline_s=20,
        )  # fmt: skip
        shipped = {
            key: value for key, value in SHIPPED_AGENT.items() if key not in ("entrypoint", "datasets")
        }
        config["shipped"] = instance_config("responses_api_agents", "gdp_pdf_agent", **shipped)
        agent = servers.enter_context(run_instance(config, "agent", workdir))
        shipped_agent = servers.enter_context(run_instance(config, "shipped", workdir))
        yield Stack(agent.url, shipped_agent.url, policy, scripted_upstream, judge)


async def run(url: str, row: dict = ROW) -> tuple[int, dict]:
    response = await request("POST", url + "/run", json=row)
    return response.status, await get_response_json(response)


def images_of(model_request: dict) -> list[Image.Image]:
    parts = model_request["input"][0]["content"]
    found = []
    for part in parts:
        if part["type"] == "input_image":
            with Image.open(io.BytesIO(base64.b64decode(part["image_url"].split(",", 1)[1]))) as image:
                found.append(image.copy())
    return found


def page_size(dpi: int) -> tuple[int, int]:
    return round(PAGE_PT[0] * 150 / 72 * dpi / 150), round(PAGE_PT[1] * 150 / 72 * dpi / 150)


async def test_the_document_is_inlined_once_and_left_out_of_the_result(stack):
    stack.script(ANSWER, judge=("PASS", "PASS"))
    status, result = await run(stack.agent_url)
    assert status == 200, result
    assert result["reward"] == 1.0
    (asked,) = stack.policy_requests()
    parts = asked["input"][0]["content"]
    assert parts[0] == {"type": "input_text", "text": QUESTION}
    assert (
        parts[1]["text"].startswith("<document>")
        and "USD 2,150" in parts[1]["text"]
        and "60 days" in parts[1]["text"]
    )
    assert [image.size for image in images_of(asked)] == [page_size(150)] * 2
    delivery = result["document_delivery"]
    assert (delivery["image_dpi"], delivery["image_count"], delivery["rejected_attempts"]) == (150, 2, [])
    assert "input_image" not in str(result), "page images are not carried into the result"
    echoed = result["responses_create_params"]["input"][0]["content"]
    assert echoed == [{"type": "input_text", "text": QUESTION}], "verify got the row as it came"


async def test_a_context_refusal_lowers_the_dpi_until_the_document_fits(stack):
    stack.script(TOO_LONG, TOO_LONG, ANSWER, judge=("PASS", "PASS"))
    status, result = await run(stack.agent_url)
    assert status == 200, result
    assert result["reward"] == 1.0
    sizes = [images_of(asked)[0].size for asked in stack.policy_requests()]
    assert sizes == [page_size(150), page_size(120), page_size(96)]
    delivery = result["document_delivery"]
    assert [(a["image_dpi"], a["limit"]) for a in delivery["rejected_attempts"]] == [
        (150, "context"),
        (120, "context"),
    ]
    assert delivery["image_dpi"] == 96 and result["failure_reason"] is None


async def test_a_document_too_large_even_at_the_lowest_dpi_is_a_marked_zero(stack):
    stack.script({"status": 413, "body": {"error": {"message": "Request Entity Too Large"}}, "repeat": 10})
    status, result = await run(stack.agent_url)
    assert status == 200, result
    dpis = [images_of(asked)[0].size for asked in stack.policy_requests()]
    assert dpis == [page_size(dpi) for dpi in (150, 120, 96, 76, 72)], "backoff by a fifth down to min_dpi"
    assert result["reward"] == 0.0 and result["response"]["status"] == "failed"
    assert result["failure_kind"] == "gdp_pdf_agent:input_too_large"
    assert (
        "terminal input limit: payload" in result["failure_reason"] and "72 DPI" in result["failure_reason"]
    )
    assert stack.judge.requests() == [], "an empty answer is not judged"


async def test_an_image_count_limit_composites_pages(stack):
    cap = {"status": 400, "body": {"error": {"message": "At most 1 images may be provided in one request."}}}
    stack.script(cap, ANSWER, judge=("PASS", "PASS"))
    status, result = await run(stack.agent_url)
    assert status == 200, result
    first, second = stack.policy_requests()
    assert len(images_of(first)) == 2
    (sheet,) = images_of(second)
    assert sheet.width == 2 * page_size(150)[0] and sheet.height > page_size(150)[1]
    assert "up to 2 pages each" in second["input"][0]["content"][1]["text"]
    assert result["document_delivery"]["pages_per_image"] == 2


async def test_a_failure_that_is_not_about_size_is_an_error_not_a_zero(stack):
    stack.script({"status": 400, "body": {"error": {"message": "invalid image data"}}})
    status, result = await run(stack.agent_url)
    assert status == 400, result
    assert len(stack.policy_requests()) == 1, "no backoff for an error the document size did not cause"


async def test_a_missing_manifest_is_a_422_naming_the_field(stack):
    row = {
        **ROW,
        "verifier_metadata": {**ROW["verifier_metadata"], "document_manifest": "nowhere/manifest.json"},
    }
    status, result = await run(stack.agent_url, row)
    assert (
        status == 422
        and "verifier_metadata.document_manifest 'nowhere/manifest.json'" in result["error"]["message"]
    )
    escaping = {
        **ROW,
        "verifier_metadata": {**ROW["verifier_metadata"], "document_manifest": "../../etc/passwd"},
    }
    status, result = await run(stack.agent_url, escaping)
    assert status == 422 and "leaves documents_base_dir" in result["error"]["message"]


async def test_a_row_with_the_document_inline_runs_as_simple_agent(stack):
    stack.script(
        "Rent is USD 2,150 a month; 60 days' written notice ends the lease early.", judge=("PASS", "PASS")
    )
    status, result = await run(stack.agent_url, INLINE_ROW)
    assert status == 200 and result["reward"] == 1.0, result
    (asked,) = stack.policy_requests()
    assert asked["input"] == INLINE_ROW["responses_create_params"]["input"]
    assert "document_delivery" not in result


async def test_the_shipped_pairing_reads_every_shipped_document(stack):
    for row in DOCUMENT_ROWS:
        manifest = orjson.loads(
            (ENV / "data" / "documents" / row["verifier_metadata"]["document_manifest"]).read_bytes()
        )
        stack.script("An answer.", judge=("PASS",) * len(row["verifier_metadata"]["rubric_criteria"]))
        status, result = await run(stack.shipped_url, row)
        assert status == 200 and result["reward"] == 1.0, result
        (asked,) = stack.policy_requests()
        document = asked["input"][0]["content"][1]["text"]
        assert document.startswith("<document>") and manifest["pages"][0]["text"].splitlines()[0] in document
        assert len(images_of(asked)) == len(manifest["pages"]) == result["document_delivery"]["page_count"]


async def test_an_answer_cut_off_by_the_output_limit_is_asked_again_with_smaller_pages(stack):
    cut = {
        "output": [assistant_message("The rent is")],
        "incomplete_details": {"reason": "max_output_tokens"},
    }
    stack.script(cut, ANSWER, judge=("PASS", "PASS"))
    status, result = await run(stack.agent_url)
    assert status == 200 and result["reward"] == 1.0, result
    assert [images_of(asked)[0].size for asked in stack.policy_requests()] == [page_size(150), page_size(120)]
    (refused,) = result["document_delivery"]["rejected_attempts"]
    assert (
        refused["limit"] == "output_truncated"
        and result["response"]["output"][0]["content"][0]["text"] == ANSWER
    )
