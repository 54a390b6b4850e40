"""The locally built tokenizer and model: exact text round trips, chat template, HF save/load."""

import pytest

from lead.core.proxy import solution_trace
from lead.io.sampling import render_prompt, user_message
from tests.conftest import SUFFIX

TEXTS = [
    "<think>\n7+3=10\n10*2=20\nLet me double-check: 10*2=20. Yes.\n</think>\nThe answer is \\boxed{20}.",
    "Start with 7, add 3.\n  two  spaces\tand a tab\n\nblank line",
    "unseen words: Zebra quokka ÄÖü ∑ 😀",  # byte-level: nothing is unknown
]


@pytest.mark.parametrize("text", TEXTS)
def test_auto_tokenizer_round_trips_exact_text(tiny_model, text):
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    path, _ = tiny_model
    for cls in (AutoTokenizer, PreTrainedTokenizerFast):
        tok = cls.from_pretrained(str(path))
        assert tok.decode(tok(text)["input_ids"]) == text


def test_digits_and_think_tags_are_single_tokens(tiny_model):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model[0]))
    pieces = [tok.decode([i]) for i in tok("<think>\n123</think>")["input_ids"]]
    assert pieces[:5] == ["<think>", "\n", "1", "2", "3"]
    assert pieces[-1] == "</think>"


def test_chat_template_renders_one_user_turn(tiny_model):
    from transformers import AutoTokenizer

    path, problems = tiny_model
    tok = AutoTokenizer.from_pretrained(str(path))
    prompt = render_prompt(tok, user_message(problems[0].question, SUFFIX))
    assert prompt == f"<|user|>{problems[0].question}{SUFFIX}\n<|assistant|>"


def test_model_loads_with_auto_class_and_generates(tiny_model):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path, problems = tiny_model
    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path))
    assert model.config.head_dim >= 32
    assert model.config.eos_token_id == tok.eos_token_id
    ids = tok(solution_trace(problems[0]), return_tensors="pt")["input_ids"]
    out = model.generate(ids, max_new_tokens=5, do_sample=False, pad_token_id=tok.pad_token_id)
    assert out.shape[1] <= ids.shape[1] + 5
    assert torch.isfinite(model(ids).logits).all()
