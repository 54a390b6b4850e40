"""The tiny base model of the embedded default, built locally (no hub needed).

Two pieces, both saved in Hugging Face format so that every later stage loads them exactly like a hub
model (``AutoModelForCausalLM.from_pretrained``, ``AutoTokenizer.from_pretrained``, ``vllm.LLM``):

* a byte-level BPE tokenizer trained with ``tokenizers`` on the proxy corpus. Its pre-tokenizer is
  Qwen2's (single digits, byte-level), so that a loader which rebuilds a ``Qwen2Tokenizer`` from the
  saved vocab and merges still tokenizes every text identically (a Qwen2 config next to a tokenizer
  of another kind was seen to make ``AutoTokenizer`` silently drop spaces and newlines);
* a small ``Qwen2ForCausalLM`` initialised from a config. ``head_dim`` is at least 32 because vLLM's
  CPU attention backend cannot serve smaller heads.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lead.config import TinySpec

# Qwen2's pre-tokenization regex: single digits, words with an optional leading non-letter, punctuation runs.
QWEN2_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"""
    r"""|\s+(?!\S)|\s+"""
)
PAD, EOS, USER, ASSISTANT = "<|pad|>", "<|endoftext|>", "<|user|>", "<|assistant|>"
THINK_TOKENS = ("<think>", "</think>")
# A minimal chat template: no system prompt (as in the paper), one user turn, the assistant's answer.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'user' %}" + USER + "{{ message['content'] }}\n"
    "{% elif message['role'] == 'assistant' %}" + ASSISTANT + "{{ message['content'] }}" + EOS + "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}" + ASSISTANT + "{% endif %}"
)


def train_tokenizer(corpus: Iterable[str], vocab_size: int):
    """Train a byte-level BPE on ``corpus`` and wrap it as a ``PreTrainedTokenizerFast`` with a chat template."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[PAD, EOS, USER, ASSISTANT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer)
    # The think tags are ordinary (non-special) added tokens: one id each, and still visible when decoding.
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in THINK_TOKENS])
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=PAD, eos_token=EOS, bos_token=None, unk_token=None
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def build_model(spec: TinySpec, tokenizer, *, seed: int = 0):
    """A freshly initialised ``Qwen2ForCausalLM`` sized by ``spec`` for ``tokenizer``."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        head_dim=spec.head_dim,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model
