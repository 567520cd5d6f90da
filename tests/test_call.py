"""The one structured model call every role makes: what reaches the backend and what is added up."""

from __future__ import annotations

from pydantic import BaseModel

from arts.policy.base import Completion, Sampling
from arts.policy.call import ask, chat


class Pick(BaseModel):
    label: str


class Recording:
    """A backend that records its calls and answers one fixed object (the test is about the call)."""

    name, model_id = "recording", "recording"

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def generate(self, prompts, n=1, sampling=None, schema=None, adapter=None, purpose=""):
        self.calls.append(
            {
                "prompts": prompts,
                "n": n,
                "sampling": sampling,
                "schema": schema,
                "adapter": adapter,
                "purpose": purpose,
            }
        )
        text = '{"label": "a"}'
        return [
            [
                Completion(
                    text=text, parsed=schema.model_validate_json(text), prompt_tokens=7, completion_tokens=3
                )
            ]
        ]


class Tally(BaseModel):
    model_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0


def test_one_prompt_with_its_sampling_schema_adapter_and_purpose_reaches_the_backend():
    backend, messages = Recording(), chat("You pick.", "Pick one.")
    comp = ask(backend, messages, Pick, purpose="audit", temperature=0.3, max_tokens=12, seed=5, adapter="a1")
    [call] = backend.calls
    assert call["prompts"] == [
        {"role": "system", "content": "You pick."},
        {"role": "user", "content": "Pick one."},
    ]
    assert (
        call["n"] == 1 and call["schema"] is Pick and call["adapter"] == "a1" and call["purpose"] == "audit"
    )
    assert call["sampling"] == Sampling(temperature=0.3, max_tokens=12, seed=5)
    assert comp.parsed == Pick(label="a")


def test_spent_adds_up_tokens_and_time_over_calls():
    backend, tally = Recording(), Tally()
    for _ in range(2):
        ask(backend, chat("s", "u"), Pick, purpose="executor", temperature=0.7, max_tokens=8, spent=tally)
    assert (tally.prompt_tokens, tally.completion_tokens) == (14, 6) and tally.model_s > 0
    assert backend.calls[0]["sampling"].seed is None  # no seed given: fresh randomness
