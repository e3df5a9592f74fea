"""The autoregressive baseline: the same weights decoding one token at a time.

Both families are causal language models too: DiffusionGemma's encoder is trained with a next-token loss over the
clean sequence, and an adapted causal LM keeps its next-token loss during adaptation. Each denoiser offers that
mode (``next_token_logits`` over a transformers DynamicCache); this module decodes with it and streams the same
frames as the diffusion engine: a StepFrame every ``step_every`` tokens, a CanvasFrame per canvas_length tokens,
a DoneFrame at the end. It exists for benchmarks and comparisons; it does not batch.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import aclosing
from types import TracebackType

import torch

from engine.channel import FrameChannel
from engine.denoise import distribution, token_entropy
from engine.frames import CanvasFrame, DoneFrame, EngineError, Frame, GenerationRequest, StepFrame
from engine.gaps import check_fits_with_gaps, fill_gaps, fits_with_gaps
from engine.generation import canvases as canvas_count
from engine.generation import check_length, encode_opening, settings_for
from engine.loading import LoadedModel
from engine.streaming import GenerationCancelled
from engine.threads import release_openmp_threads

# generate()'s default final temperature; the baseline samples at the temperature diffusion ends its canvases with.
DEFAULT_TEMPERATURE = 0.4


def generate_autoregressive(
    loaded: LoadedModel,
    request: GenerationRequest,
    emit: Callable[[Frame], None],
    cancelled: Callable[[], bool] = lambda: False,
    step_every: int = 8,
    started: float | None = None,
    max_tokens: int | None = None,
) -> list[int]:
    """Decode ``request`` token by token in the calling thread, emitting frames; returns the new token ids.
    ``max_tokens`` ends it sooner than the request's canvases would (a benchmark matching another page's length).

    Samples at ``t_min`` (or the checkpoint's, else 0.4) from a generator seeded with ``request.seed``; a
    temperature of 0 decodes greedily. Raises GenerationCancelled once ``cancelled()`` turns true.
    """
    started = time.perf_counter() if started is None else started
    if step_every < 1:
        raise ValueError(f"step_every must be 1 or more (a StepFrame every that many tokens), not {step_every}")
    settings_for(loaded, request)  # the same validation as the diffusion engine
    request = fill_gaps(loaded, request, emit, cancelled)  # an opening's holes (engine.gaps), then the rest
    denoiser, tokenizer, length = loaded.denoiser, loaded.tokenizer, loaded.canvas_length
    temperature = request.t_min if request.t_min is not None else loaded.defaults.t_min
    temperature = DEFAULT_TEMPERATURE if temperature is None else float(temperature)
    generator = torch.Generator(device=loaded.device).manual_seed(request.seed)

    prompt = denoiser.encode_prompt(request.prompt)
    max_new = canvas_count(loaded, request) * length
    max_new = max_new if max_tokens is None else min(max_new, max_tokens)
    opening = encode_opening(loaded, request.opening, max_new)  # read as given, then continued
    check_length(loaded, len(prompt), max_new)
    cache = denoiser.new_cache()
    next_input = torch.tensor([prompt + opening], dtype=torch.long, device=loaded.device)  # (1, T) then (1, 1)

    tokens: list[int] = list(opening)
    whole = len(opening) // length * length  # the opening's whole canvases: written as given, no step taken
    canvas: list[int] = list(opening[whole:])  # tokens of the canvas being written
    canvases: list[CanvasFrame] = []
    forwards = 0
    entropies: list[float] = []  # since the last StepFrame
    step = 0
    canvas_started = time.perf_counter()
    first_frame: float | None = None

    def show(frame: Frame) -> None:
        nonlocal first_frame
        first_frame = first_frame or time.perf_counter()
        emit(frame)

    def end_canvas() -> None:
        nonlocal canvas, step, canvas_started
        text = tokenizer.decode(canvas, skip_special_tokens=True)
        frame = CanvasFrame(len(canvases), len(canvas), text, len(canvas), time.perf_counter() - canvas_started)
        canvases.append(frame)
        show(frame)
        canvas, step, canvas_started = [], 0, time.perf_counter()

    for start in range(0, whole, length):
        text = tokenizer.decode(opening[start : start + length], skip_special_tokens=True)
        canvases.append(CanvasFrame(len(canvases), 0, text, length, 0.0))
        show(canvases[-1])
    with torch.inference_mode():
        for _ in range(max_new - len(opening)):
            if cancelled():
                raise GenerationCancelled
            logits = denoiser.next_token_logits(next_input, cache)  # (1, V)
            forwards += 1
            if temperature > 0:
                logits = logits / temperature
            shifted, probs = distribution(logits)
            if temperature > 0:
                next_input = torch.multinomial(probs, 1, generator=generator)  # (1, 1)
            else:
                next_input = logits.argmax(dim=-1, keepdim=True)  # (1, 1)
            entropies.append(float(token_entropy(shifted, probs).sum()))
            token = int(next_input)
            if request.stop_at_eos and token == denoiser.eos_id:
                break
            tokens.append(token)
            canvas.append(token)
            if len(canvas) % step_every == 0 or len(canvas) == length:
                step += 1
                text = tokenizer.decode(canvas, skip_special_tokens=True)
                show(StepFrame(len(canvases), step, text, len(entropies), sum(entropies) / len(entropies)))
                entropies = []
            if len(canvas) == length:
                end_canvas()
    if canvas or not canvases:  # the EOS ended a canvas early (or came first)
        end_canvas()
    now = time.perf_counter()
    show(
        DoneFrame(
            text=tokenizer.decode(tokens, skip_special_tokens=True),
            canvases=tuple(canvases),
            tokens_per_forward=1.0,
            ttff_s=(first_frame or now) - started,
            seconds=now - started,
            stats={"tokens": float(len(tokens)), "forwards": float(forwards)},
        )
    )
    return tokens


class AutoregressiveEngine:
    """A TextEngine that decodes token by token with the loaded model's encoder; one request at a time."""

    def __init__(self, loaded: LoadedModel, step_every: int = 8) -> None:
        if step_every < 1:
            raise ValueError(f"step_every must be 1 or more (a StepFrame every that many tokens), not {step_every}")
        self.loaded = loaded
        self.step_every = step_every
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="genui-autoregressive")
        release_openmp_threads()  # the model was loaded in this thread; the executor's computes from now on
        self._open: set[FrameChannel] = set()
        self._closed = False

    @property
    def model_id(self) -> str:
        return f"{self.loaded.model_id}/autoregressive"  # same weights, different text: keep caches apart

    def stream(self, request: GenerationRequest) -> AsyncIterator[Frame]:
        return self._frames(request)

    def fits(self, request: GenerationRequest) -> bool:
        return fits_with_gaps(self.loaded, request)

    async def close(self) -> None:
        """Fail the streams still open, stop decoding, and wait for the worker thread."""
        self._closed = True
        for channel in list(self._open):
            channel.fail(EngineError("the engine has closed"))
            channel.cancel()
        await asyncio.to_thread(self._executor.shutdown, wait=True, cancel_futures=True)

    async def __aenter__(self) -> AutoregressiveEngine:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()

    async def _frames(self, request: GenerationRequest) -> AsyncIterator[Frame]:
        if self._closed:
            raise EngineError("the engine has closed")
        settings_for(self.loaded, request)
        check_fits_with_gaps(self.loaded, request)  # before it takes the worker
        channel = FrameChannel()
        started = time.perf_counter()
        asyncio.get_running_loop().run_in_executor(self._executor, self._run, request, channel, started)
        self._open.add(channel)
        try:
            async with aclosing(channel.frames()) as frames:
                async for frame in frames:
                    yield frame
        finally:
            self._open.discard(channel)

    def _run(self, request: GenerationRequest, channel: FrameChannel, started: float) -> None:
        try:
            generate_autoregressive(
                self.loaded, request, channel.send, channel.is_cancelled, self.step_every, started=started
            )
        except GenerationCancelled:
            pass
        except Exception as exc:
            channel.fail(exc if isinstance(exc, EngineError) else EngineError(f"generation failed: {exc}"))
        finally:
            channel.close()
            release_openmp_threads()  # one request at a time: idle until the next (engine.threads)
