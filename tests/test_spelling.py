"""One spelling per phrase: constrained decoding writes a move, a target, a label and a key as the
tokenizer splits them, replays the same masks, and replays a completion sampled without the rules
under the grammar alone."""

from __future__ import annotations

import json

import pytest

from arts.policy.base import Sampling
from arts.policy.proposal_schema import directed_pattern, proposal_schema

MOVES = [{"STEPS": ["increase", "decrease"], "CHUNK": ["increase", "decrease"]}] * 2
PROMPT = [{"role": "user", "content": "Propose two experiments for a solver with knobs STEPS and CHUNK."}]


def _schema():
    patterns = [directed_pattern(m) for m in MOVES]
    return proposal_schema([0, 4], 2, patterns=patterns, shares=MOVES, axis_first=True)


def _written(tok, completion) -> list[tuple[str, list[int]]]:
    """(text, tokens) of every move, target and key a completion wrote, as its sampled tokens."""
    pieces, text = [], ""
    bounds = []
    for t in completion.token_ids:
        bounds.append(len(text))
        text += tok.decode([t])
    bounds.append(len(text))
    phrases = ["increase STEPS", "decrease STEPS", "increase CHUNK", "decrease CHUNK", "candidates", "parent"]
    for phrase in phrases:
        at = text.find(phrase)
        while at >= 0:
            if at in bounds and at + len(phrase) in bounds:
                i, j = bounds.index(at), bounds.index(at + len(phrase))
                pieces.append((phrase, completion.token_ids[i:j]))
            else:  # the phrase shares a token with the text around it: a spelling of its own
                pieces.append((phrase, []))
            at = text.find(phrase, at + 1)
    return pieces


def _sample(backend, spelled: bool, n: int = 6):
    backend.grammars.spelling = spelled
    backend.jump_forward = True
    sampling = Sampling(temperature=1.0, max_tokens=200, seed=3)
    return backend.generate(PROMPT, n=n, sampling=sampling, schema=_schema())[0]


def test_decoding_writes_each_phrase_in_the_tokenizers_spelling(tiny_backend):
    """A random tiny model under the grammar alone misspells the moves and keys (the rule is not vacuous);
    with the spelling rules every one it writes is the tokenizer's split, and the answers still parse."""
    tok = tiny_backend.tokenizer
    canonical = lambda text: tok.encode(text, add_special_tokens=False)  # noqa: E731
    loose = [p for c in _sample(tiny_backend, False) for p in _written(tok, c)]
    assert loose and any(tokens != canonical(text) for text, tokens in loose)
    kept = _sample(tiny_backend, True) + _sample(tiny_backend, True, n=1)  # n=1: forced text jumps ahead
    written = [p for c in kept for p in _written(tok, c)]
    assert written and all(tokens == canonical(text) for text, tokens in written)
    assert all(c.error is None or "truncated" in c.error for c in kept)
    assert sum(c.parsed is not None for c in kept) >= 1


def test_replay_scores_what_sampling_recorded_with_and_without_the_rules(tiny_backend):
    """Log-probs replayed under the schema equal the recorded ones (the rules narrow both alike); a
    completion sampled without the rules replays under the grammar alone, so its score stays finite."""
    schema = _schema()
    for spelled in (True, False):
        completion = _sample(tiny_backend, spelled, n=1)[0]
        tiny_backend.grammars.spelling = True
        replayed = tiny_backend.logprobs(PROMPT, completion.token_ids, schema=schema)
        assert replayed == pytest.approx(completion.logprobs, abs=1e-4)


def test_a_schema_lists_its_phrases_and_a_free_field_keeps_its_text(tiny_backend):
    """The offered moves, the enum values and the keys are phrases; in a free field only a phrase's
    misspelling is refused: a text that leaves every phrase ("incremental") stays writable."""
    from arts.policy.backends.spelling import NAMES, schema_phrases

    found = schema_phrases(_schema().model_json_schema())
    assert set(found["hypothesis"]) == {"increase STEPS", "decrease STEPS", "increase CHUNK", "decrease CHUNK"}
    assert set(found["axis"]) == {"STEPS", "CHUNK"} and {"parent", "candidates"} <= set(found[NAMES])
    free = {"type": "object", "properties": {"note": {"type": "string", "x-phrases": ["increase STEPS"]}}}
    grammars, tok = tiny_backend.grammars, tiny_backend.tokenizer
    for text in ("increment by one", "increase STEPS now"):
        tokens = tok.encode(json.dumps({"note": text}), add_special_tokens=False) + [tok.eos_token_id]
        masks, rejected, *_ = grammars.replay_bitmasks(free, tokens)
        assert rejected is None
    matcher = grammars.matcher(free)
    for t in tok.encode('{"note": "incre', add_special_tokens=False):
        assert matcher.accept_token(t)
    (a,), (ase,) = (tok.encode(s, add_special_tokens=False) for s in ("a", "ase"))
    assert not matcher.accept_token(a) and matcher.misspelled  # incre·a·se: not the tokenizer's split
    assert matcher.accept_token(ase) and matcher.text.endswith(b"increase")


def test_schemas_sent_to_servers_leave_the_phrase_lists_out():
    """A strict server may refuse an unknown keyword: `x-phrases` and `x-choice-heat` stay local (the grammar
    is the same)."""
    from arts.policy.backends.chat_format import json_schema_format
    from arts.policy.backends.spelling import HEAT, PHRASES

    patterns = [directed_pattern(m) for m in MOVES]
    schema = proposal_schema([0, 4], 2, patterns=patterns, shares=MOVES, axis_first=True, heat=2.0)
    assert PHRASES in json.dumps(schema.model_json_schema()) and HEAT in schema.model_json_schema()
    sent = json_schema_format(schema)["json_schema"]["schema"]
    assert PHRASES not in json.dumps(sent) and HEAT not in sent and "pattern" in json.dumps(sent)


def test_only_a_backend_that_draws_phrase_choices_itself_gets_a_heat(tiny_backend):
    """A server constrains its own decoding and would not heat a choice, while replay would: a scientist
    on one asks for no heat."""
    from arts.policy.scientist import Scientist, ScientistConfig
    from tests.doubles import RuleBackend

    config = ScientistConfig(choice_heat=2.0)
    assert Scientist(tiny_backend, config).heat == 2.0
    assert Scientist(RuleBackend(), config).heat == 1.0


def test_where_a_completion_wrote_a_phrase_is_the_tokens_that_cover_it():
    from arts.policy.backends.spelling import written

    pieces = ['"', "incre", "ase", " S", "TE", "PS", '",', ' "', "increase", " STE", "PS"]
    assert written(pieces, "increase STEPS") == [(1, 6), (8, 11)]
    assert written(["xincrease", " STEPS"], "increase STEPS") == [(0, 2)]  # a token shared with the text before
    assert written(pieces, "decrease STEPS") == []


def test_a_phrase_choice_is_drawn_at_the_schemas_heat_and_replay_scores_it_there(tiny_backend):
    """The axis's first token (STEPS or CHUNK) is a phrase choice: sampled at the schema's heat times the
    temperature, and replay marks the same position with the same factor, so the frequency with which
    the sampler wrote STEPS matches the probability training scores for it; at heat 1 the score would not
    (a cold heat, 0.05, makes the gap plain on a random tiny model)."""
    import torch

    from arts.training.logprobs import span_targets, target_scores

    patterns = [directed_pattern(m) for m in MOVES]
    schema = proposal_schema([0, 4], 2, patterns=patterns, shares=MOVES, axis_first=True, heat=0.05)
    tok, grammars = tiny_backend.tokenizer, tiny_backend.grammars
    grammars.spelling = True
    steps = tok.encode("STEPS", add_special_tokens=False)[0]
    sampling = Sampling(temperature=1.0, max_tokens=24, seed=5)
    drawn = tiny_backend.generate(PROMPT, n=200, sampling=sampling, schema=schema)[0]
    json_schema, prompt_ids = schema.model_json_schema(), tiny_backend.encode_prompt(PROMPT)
    wrote, hot, flat = [], [], []
    for c in drawn:
        got = grammars.replay_bitmasks(json_schema, c.token_ids)
        at = next(i for i, s in enumerate(got.scales) if s != 1.0)
        assert got.scales[at] == 0.05 and tok.decode(c.token_ids[:at]).endswith('"axis": "')
        wrote.append(c.token_ids[at] == steps)
        (target,) = span_targets(tiny_backend, json_schema, c.token_ids[: at + 1], [(at, at + 1)])
        for out in (hot, flat):
            seen: dict = {}
            with torch.no_grad():
                keep = lambda every, column, seen=seen: seen.update(every=every, column=column)  # noqa: E731
                target_scores(
                    tiny_backend.model, prompt_ids, [target], tok.eos_token_id, 1.0, distribution=keep
                )
            out.append(float(seen["every"][0, seen["column"][at], steps].exp()))
            target.scales = None  # the second pass: as if drawn at the temperature alone
    frequency = sum(wrote) / len(wrote)
    assert abs(frequency - sum(hot) / len(hot)) < 0.1
    assert abs(frequency - sum(flat) / len(flat)) > 0.2
