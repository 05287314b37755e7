"""The endpoint backend's wire format, retries and failure modes, against a local fake server."""

from __future__ import annotations

import json
import threading
import time

import pytest

from agent.llm import Choice, EndpointUnavailableError, LLMError, Regex, TruncatedOutputError
from agent.llm.endpoint import EndpointLLM, normalize_base_url
from agent.llm.http import HttpLimits
from agent.testing import replies
from agent.testing.ports import free_port
from agent.testing.server import Answer, Call, FakeServer
from grammars.demo import CharacterSheet

USER = [{"role": "user", "content": "hi"}]


def chat_reply(content: str, finish: str = "stop", cached: int | None = 7) -> dict:
    return replies.chat_reply(content, finish, model="fake", prompt=20, completion=5, cached=cached)


class QueueServer(FakeServer):
    """Answers each POST from ``queue`` ((status, body) pairs) after ``delay_s``, every GET with
    ``models``; ``peak_in_flight`` is the most POSTs it held at once."""

    def __init__(self) -> None:
        self.queue: list[tuple[int, dict | str]] = []
        self.models = ["m"]
        self.delay_s = 0.0
        self.in_flight = self.peak_in_flight = 0
        self._lock = threading.Lock()
        super().__init__({"GET *": self.list_models, "POST *": self.answer})

    def list_models(self, call: Call) -> Answer:
        return Answer(200, replies.model_list(*({"id": name} for name in self.models)))

    def answer(self, call: Call) -> Answer:
        with self._lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            answer = self.queue.pop(0)
        time.sleep(self.delay_s)  # long enough for concurrent requests to overlap
        with self._lock:
            self.in_flight -= 1
        return Answer(*answer)


@pytest.fixture
def fake():
    server = QueueServer()
    yield server
    server.close()


def test_base_url_forms():
    assert normalize_base_url("http://h:1") == "http://h:1/v1"
    assert normalize_base_url("http://h:1/v1/") == "http://h:1/v1"
    with pytest.raises(ValueError):
        normalize_base_url("h:1")


def test_model_defaults_to_the_only_served_one_and_several_need_a_choice(fake):
    fake.models = ["fake-model"]
    assert EndpointLLM(fake.root).model == "fake-model"
    fake.models = ["llama3", "qwen3:8b", "gemma3"]  # what Ollama lists: every pulled model
    with pytest.raises(LLMError, match=r"serves 3 models; choose one with --model .*llama3, qwen3:8b, gemma3"):
        EndpointLLM(fake.root)
    with pytest.raises(LLMError, match="does not serve model 'nope'; it serves: llama3"):
        EndpointLLM(fake.root, "nope")
    assert EndpointLLM(fake.root, "gemma3").model == "gemma3"


def test_wire_format_uses_current_structured_output_fields(fake):
    fake.queue += [
        (
            200,
            chat_reply(
                json.dumps(
                    {
                        "name": "Ada",
                        "temperament": "sly",
                        "is_villain": True,
                        "possessions": [{"item": "knife", "treasured": False}],
                    }
                )
            ),
        ),
        (200, chat_reply("1999")),
        (200, chat_reply("red")),
        (200, chat_reply("free", cached=None)),
    ]
    llm = EndpointLLM(fake.root, "m", api_key="sekret", thinking="off")
    sheet = llm.generate(USER, CharacterSheet, temperature=0.8, max_tokens=99, seed=3, stop=["END"])
    assert sheet.parsed.is_villain and sheet.usage.cached_prompt_tokens == 7
    llm.generate(USER, Regex(r"\d{4}"), temperature=0, max_tokens=5)
    llm.generate(USER, Choice(["red", "blue"]), temperature=0, max_tokens=5)
    free = llm.generate(USER, temperature=0.5, max_tokens=5, min_tokens=2)
    assert free.usage.cached_prompt_tokens == 0
    body = fake.bodies[0]
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["strict"] is True
    assert body["response_format"]["json_schema"]["schema"]["additionalProperties"] is False
    assert body["seed"] == 3 and body["stop"] == ["END"] and body["max_tokens"] == 99
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert fake.bodies[1]["structured_outputs"] == {"regex": r"\d{4}"}
    assert fake.bodies[2]["structured_outputs"] == {"choice": ["red", "blue"]}
    assert fake.bodies[3]["min_tokens"] == 2 and "response_format" not in fake.bodies[3]
    for sent in fake.bodies:
        assert not any(key.startswith("guided_") for key in sent)  # removed in vLLM 0.12
    assert fake.posted()[0].headers.get("Authorization") == "Bearer sekret"


def test_structured_reply_cut_at_length_raises(fake):
    fake.queue.append((200, chat_reply('{"name": "A', finish="length")))
    with pytest.raises(TruncatedOutputError):
        EndpointLLM(fake.root, "m").generate(USER, CharacterSheet, temperature=0, max_tokens=4)


def test_server_reasoning_field_is_kept_apart(fake):
    reply = chat_reply('{"n": 1}')
    reply["choices"][0]["message"]["reasoning_content"] = "let me think"
    fake.queue.append((200, reply))
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    completion = EndpointLLM(fake.root, "m").generate(USER, schema, temperature=0, max_tokens=9)
    assert completion.parsed == {"n": 1} and completion.reasoning == "let me think"


def test_5xx_is_retried_with_backoff_then_succeeds(fake):
    fake.queue += [(503, {"error": {"message": "busy"}}), (500, "oops"), (200, chat_reply("ok"))]
    llm = EndpointLLM(fake.root, "m", limits=HttpLimits(backoff_s=0.01))
    assert llm.generate(USER, temperature=0, max_tokens=5).text == "ok"
    assert len(fake.bodies) == 3


def test_persistent_5xx_gives_up_naming_the_endpoint(fake):
    fake.queue += [(502, {"error": {"message": "bad gateway"}})] * 3
    llm = EndpointLLM(fake.root, "m", limits=HttpLimits(backoff_s=0.01, max_retries=2))
    with pytest.raises(EndpointUnavailableError, match=r"unavailable after 3 attempts .*bad gateway") as info:
        llm.generate(USER, temperature=0, max_tokens=5)
    assert fake.root in str(info.value)


def test_4xx_is_not_retried_and_shows_the_server_message(fake):
    fake.queue.append((400, {"error": {"message": "max_tokens is too large"}}))
    with pytest.raises(LLMError, match="HTTP 400: max_tokens is too large"):
        EndpointLLM(fake.root, "m").generate(USER, temperature=0, max_tokens=5)
    assert len(fake.bodies) == 1


def test_unreachable_endpoint_fails_in_bounded_time():
    port = free_port()  # nothing listens there
    started = time.monotonic()
    with pytest.raises(EndpointUnavailableError, match=f"127.0.0.1:{port}"):
        EndpointLLM(f"http://127.0.0.1:{port}", "m", limits=HttpLimits(backoff_s=0.05)).generate(
            USER, temperature=0, max_tokens=5
        )
    assert time.monotonic() - started < 10


def test_generate_many_runs_requests_concurrently(fake):
    from agent.llm import Request

    fake.queue += [(200, chat_reply(str(i))) for i in range(6)]
    fake.delay_s = 0.3
    llm = EndpointLLM(fake.root, "m", concurrency=3)
    started = time.monotonic()
    results = llm.generate_many([Request(USER, Choice([str(i) for i in range(6)]), max_tokens=3) for _ in range(6)])
    assert sorted(r.text for r in results) == [str(i) for i in range(6)]
    assert fake.peak_in_flight == 3  # three at a time: concurrent, and never more than asked
    assert time.monotonic() - started < 6 * 0.3  # sequential requests would take 1.8 s
