"""``genui trajectories``: the denoiser's own paths to its pages, as training inputs for ``genui adapt``.

A denoiser that is trained only on uniform noise over corpus pages sees, at inference, canvases no training step
showed it: half its own draft, half fresh noise. It converges to its page slowly (docs/model.md, session 34: a
canvas's last five steps change 1-5 tokens each). Consistency training, as CLLMs do for Jacobi decoding and
dParallel for masked diffusion, teaches a model to jump from any point of its own path to where that path ends.

For training pages of the corpus (never held-out ones), this command writes each page as ``genui serve`` would (the
route's prompt, opening and gaps, the checkpoint's sampler), records the canvas every denoising step read, and
keeps the page when, sanitised, it has its site's skeleton and at least ``--min-words`` dictionary words. A kept
page is stored as its prompt, the tokens the engine wrote (its targets), and the distinct canvases each of its
canvases went through on the way: ``genui adapt --trajectories FILE`` trains on a recorded canvas in place of the
uniform noise. The file is rewritten every ``--save-every`` pages and at the end, so a run can stop and resume.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from genui.resources import bundled


@dataclass(frozen=True, slots=True)
class Trajectories:
    """Pages with the canvases the sampler read on the way to them, in one compact .npz file."""

    canvas_length: int
    prompts: np.ndarray  # (N_prompt_tokens,) int32
    prompt_offsets: np.ndarray  # (N+1,) int64
    responses: np.ndarray  # (N_response_tokens,) int32: the page's tokens, through its end-of-text
    response_offsets: np.ndarray  # (N+1,) int64
    states: np.ndarray  # (N_states, C) int32: the canvases the sampler read, page by page, canvas by canvas
    state_canvas: np.ndarray  # (N_states,) int16: which of its page's canvases a state belongs to
    state_offsets: np.ndarray  # (N+1,) int64: page i's states are states[state_offsets[i]:state_offsets[i+1]]
    sites: tuple[str, ...]
    paths: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.paths)

    def prompt(self, i: int) -> np.ndarray:
        return self.prompts[self.prompt_offsets[i] : self.prompt_offsets[i + 1]]

    def response(self, i: int) -> np.ndarray:
        return self.responses[self.response_offsets[i] : self.response_offsets[i + 1]]

    def pick(self, i: int, generator: torch.Generator) -> np.ndarray:
        """One recorded canvas of each of page i's canvases, drawn uniformly, as (K, C); a canvas the sampler never
        stepped (an opening that fills it) is its final tokens."""
        length = self.canvas_length
        response = self.response(i)
        k = -(-len(response) // length)
        final = np.full(k * length, response[-1], dtype=np.int64)  # past the end: its end-of-text, as trained
        final[: len(response)] = response
        chosen = final.reshape(k, length).copy()
        states = self.states[self.state_offsets[i] : self.state_offsets[i + 1]]
        owners = self.state_canvas[self.state_offsets[i] : self.state_offsets[i + 1]]
        for canvas in range(k):
            rows = np.flatnonzero(owners == canvas)
            if len(rows):
                chosen[canvas] = states[rows[int(torch.randint(len(rows), (), generator=generator))]]
        return chosen

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".tmp.npz")
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        fields["sites"], fields["paths"] = np.array(self.sites), np.array(self.paths)
        np.savez_compressed(partial, **fields)
        partial.replace(path)

    @classmethod
    def load(cls, path: Path) -> Trajectories:
        with np.load(path) as z:
            return cls(
                int(z["canvas_length"]),
                *(z[name] for name in ("prompts", "prompt_offsets", "responses", "response_offsets", "states")),
                z["state_canvas"],
                z["state_offsets"],
                tuple(str(s) for s in z["sites"]),
                tuple(str(p) for p in z["paths"]),
            )

    @classmethod
    def build(cls, canvas_length: int, pages: list[dict[str, Any]]) -> Trajectories:
        """From pages as ``record`` returns them (prompt, response, states, state_canvas, site, path)."""

        def offsets(parts: list[np.ndarray]) -> np.ndarray:
            return np.cumsum([0, *map(len, parts)]).astype(np.int64)

        def joined(parts: list[np.ndarray], dtype: type, width: int | None = None) -> np.ndarray:
            empty = np.zeros((0,) if width is None else (0, width), dtype=dtype)
            return np.concatenate(parts).astype(dtype) if parts else empty

        prompts = [np.asarray(p["prompt"]) for p in pages]
        responses = [np.asarray(p["response"]) for p in pages]
        states = [np.asarray(p["states"]).reshape(-1, canvas_length) for p in pages]
        owners = [np.asarray(p["state_canvas"]) for p in pages]
        return cls(
            canvas_length,
            joined(prompts, np.int32),
            offsets(prompts),
            joined(responses, np.int32),
            offsets(responses),
            joined(states, np.int32, canvas_length),
            joined(owners, np.int16),
            offsets(states),
            tuple(p["site"] for p in pages),
            tuple(p["path"] for p in pages),
        )

    def pages(self) -> list[dict[str, Any]]:
        """The inverse of build: one dict a page."""
        return [
            {
                "prompt": self.prompt(i),
                "response": self.response(i),
                "states": self.states[self.state_offsets[i] : self.state_offsets[i + 1]],
                "state_canvas": self.state_canvas[self.state_offsets[i] : self.state_offsets[i + 1]],
                "site": self.sites[i],
                "path": self.paths[i],
            }
            for i in range(len(self))
        ]


class Recorder:
    """A denoiser that hands every call to the one it wraps and keeps the canvas each denoising step read, canvas
    by canvas (a commit starts the next canvas)."""

    narrow = None  # every step over every row of the batch: the loop leaves no row out, so each row is recorded

    def __init__(self, denoiser: Any) -> None:
        self._inner = denoiser
        self.length = int(denoiser.canvas_length)
        self.canvases: list[list[torch.Tensor]] = [[]]  # per canvas, each step's (B, C) canvas

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def denoise(self, prefix: Any, canvas: torch.Tensor, self_conditioning: torch.Tensor | None) -> torch.Tensor:
        self.canvases[-1].append(canvas.detach().cpu().clone())
        return self._inner.denoise(prefix, canvas, self_conditioning)  # type: ignore[no-any-return]

    def denoise_changed(self, prefix: Any, canvas: torch.Tensor, neighbours: int) -> torch.Tensor:
        self.canvases[-1].append(canvas.detach().cpu().clone())
        return self._inner.denoise_changed(prefix, canvas, neighbours)  # type: ignore[no-any-return]

    def commit(self, prefix: Any, canvas: torch.Tensor) -> None:
        self.canvases.append([])
        self._inner.commit(prefix, canvas)

    def row(self, index: int, tokens: torch.Tensor, eos: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Row ``index``'s page: its tokens through the first end-of-text (padding after it becomes end-of-text),
        and the distinct canvases each of those canvases read, in order (a row the adaptive stop has ended reads
        its canvas again while the batch goes on), with the canvas each belongs to."""
        row = tokens[index].cpu().numpy().astype(np.int64)
        ends = np.flatnonzero(row == eos)
        response = row[: ends[0] + 1] if len(ends) else row
        canvases = -(-len(response) // self.length)
        states, owners = [], []
        for canvas, steps in enumerate(self.canvases[:canvases]):
            last = None
            for step in steps:
                state = step[index].numpy().astype(np.int64)
                if last is None or not np.array_equal(state, last):
                    states.append(state)
                    owners.append(canvas)
                last = state
        return response, np.array(states).reshape(-1, self.length), np.array(owners, dtype=np.int16)


def record(loaded: Any, requests: list[Any]) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray, list[int]]]:
    """Write ``requests`` (one batch, gaps already filled) as the engine would; per request its text (as a
    DoneFrame gives it), page tokens, recorded canvases, their canvas indexes, and the prompt's tokens."""
    from engine.frames import DoneFrame
    from engine.generation import plan_batch, run_plan
    from engine.streaming import Row

    recorder = Recorder(loaded.denoiser)
    watched = dataclasses.replace(loaded, denoiser=recorder)
    texts = [""] * len(requests)

    def emitter(index: int) -> Any:
        def emit(frame: Any) -> None:
            if isinstance(frame, DoneFrame):
                texts[index] = frame.text

        return emit

    plan = plan_batch(watched, requests, [Row(emit=emitter(i)) for i in range(len(requests))])
    tokens = run_plan(watched, plan)
    eos = loaded.denoiser.eos_id
    tokens = torch.where(tokens == loaded.denoiser.pad_id, eos, tokens)  # past a row's end: end-of-text, as trained
    out = []
    for index, request in enumerate(requests):
        response, states, owners = recorder.row(index, tokens, eos)
        prompt = loaded.denoiser.encode_prompt(request.prompt)
        out.append((texts[index], response, states, owners, prompt))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="genui trajectories", description=__doc__.split("\n\n")[0].replace("``", ""), allow_abbrev=False
    )
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus.jsonl"), help="from genui corpus")
    parser.add_argument("--out", type=Path, default=Path("data/trajectories.npz"), help=".npz to add pages to")
    parser.add_argument("--model", default=None, help="the genui model that writes (default: the shipped adapter)")
    parser.add_argument("--pages", type=int, default=100, help="training pages to try this run (default 100)")
    parser.add_argument(
        "--batch",
        type=int,
        default=1,
        help="pages written at once (default 1: on a CPU a batch runs every row "
        "as long as its slowest, so it is no faster)",
    )
    parser.add_argument("--save-every", type=int, default=32, help="rewrite --out after this many pages (default 32)")
    parser.add_argument("--device", help="cpu or cuda (default: cuda when there is one)")
    parser.add_argument("--threads", type=int, help="torch threads on CPU (default: torch's choice)")
    parser.add_argument("--sites-dir", type=Path, default=bundled("sites"))
    parser.add_argument(
        "--min-words", type=float, default=0.8, help="least share of dictionary words kept (default 0.8)"
    )
    parser.add_argument("--site", action="append", help="only this site's pages (repeat for several; default: all)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.pages < 1 or args.batch < 1:
        parser.error("--pages and --batch must be positive")
    if not args.corpus.is_file():
        print(f"genui trajectories: {args.corpus} is missing: build it with `genui corpus`", file=sys.stderr)
        return 2

    from tqdm import tqdm

    from engine.gaps import fill_gaps
    from engine.generation import batch_key
    from engine.loading import load_model
    from lab.distill import Keeper, plan_jobs
    from lab.quality import load_dictionary

    kept = Trajectories.load(args.out) if args.out.is_file() else None
    kept_pages = kept.pages() if kept is not None else []
    done = {(page["site"], page["path"]) for page in kept_pages}
    jobs = plan_jobs(args.corpus, args.sites_dir, done, args.pages, args.seed, args.site)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    loaded = load_model(args.model, device=device)
    if kept is not None and kept.canvas_length != loaded.canvas_length:
        raise SystemExit(
            f"genui trajectories: {args.out} holds canvases of {kept.canvas_length} tokens and {args.model} writes "
            f"{loaded.canvas_length}: resuming would cut its pages into the wrong canvases; give another --out"
        )
    if loaded.family != "adapted-causal-lm":
        raise SystemExit(f"genui trajectories: {args.model} is a {loaded.family} checkpoint; it takes a genui adapter")
    if args.threads:
        torch.set_num_threads(args.threads)
    keeper = Keeper(load_dictionary(), args.min_words)
    groups: dict[Any, list[Any]] = {}
    for job in jobs:  # requests that share their settings share a batch
        groups.setdefault(batch_key(job.request), []).append(job)
    started = time.perf_counter()
    bar = tqdm(total=len(jobs), desc="trajectories", unit="page", file=sys.stderr, mininterval=5)
    batches = 0
    for group in groups.values():
        for first in range(0, len(group), args.batch):
            batch = group[first : first + args.batch]
            seed = args.seed + len(done) + batches  # a batch runs under one seed; each batch its own noise
            batches += 1
            requests = [fill_gaps(loaded, dataclasses.replace(job.request, seed=seed)) for job in batch]
            for job, (text, response, states, owners, prompt) in zip(batch, record(loaded, requests), strict=True):
                if keeper.keep(job, text) is not None:
                    kept_pages.append(
                        {
                            "prompt": prompt,
                            "response": response,
                            "states": states,
                            "state_canvas": owners,
                            "site": job.site,
                            "path": job.path,
                        }
                    )
            bar.update(len(batch))
            if batches % max(1, args.save_every // args.batch) == 0:
                Trajectories.build(loaded.canvas_length, kept_pages).save(args.out)
    Trajectories.build(loaded.canvas_length, kept_pages).save(args.out)
    bar.close()
    print(keeper.summary(len(jobs), time.perf_counter() - started, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
