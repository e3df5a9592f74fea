"""``genui distill``: pages a causal LM writes itself, as extra targets for the adaptation corpus.

For training pages of the corpus (never held-out ones), the writer gets the page's prompt in its chat template
followed by the route's opening, as a served page starts, and writes the rest autoregressively with transformers'
``generate()`` (sampling), ``--batch`` pages at a time. The writer is the base causal LM (``--base``, default the
pinned SmolLM2; rows marked ``"source": "base"``) or an adapted genui model in its causal mode (``--model``, e.g.
the shipped adapter; rows marked ``"source": "self"``): its own autoregressive pages are the easiest targets its
denoiser can learn to write in parallel. A page is kept when, sanitised, it has its site's skeleton
(``lab.quality.skeleton_ok``) and at least ``--min-words`` of its words are dictionary words (the quality report's
measure; it drops made-up names and letter soup). Kept pages are corpus rows appended to ``--out`` as they come, so
a run can stop at any time and resume: paths already in ``--out`` are not tried again.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from engine.frames import GenerationRequest
from genui.pages import SiteRuntime
from genui.resources import bundled
from genui.sanitize import sanitize_html
from genui.sites import load_sites
from lab.quality import load_dictionary, shape, skeleton_ok, words


@dataclass(frozen=True, slots=True)
class Job:
    site: str
    path: str
    prompt: str
    opening: str
    budget: int  # the site's page budget in tokens
    request: GenerationRequest | None = None  # the request the site sends for it (genui trajectories writes that)


def plan_jobs(
    corpus: Path, sites_dir: Path, done: set[tuple[str, str]], pages: int, seed: int, only: list[str] | None = None
) -> list[Job]:
    """Up to ``pages`` training pages not yet in ``done``, in a seeded order, with the prompt and opening the site
    would send for them; ``only`` names the sites to take them from (default: every site)."""
    sites = {site.name: site for site in load_sites(sites_dir) if not only or site.name in only}
    runtimes = {name: SiteRuntime.build(site, mount="") for name, site in sites.items()}
    rows = []
    with corpus.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            if not row["holdout"] and row["site"] in runtimes and (row["site"], row["path"]) not in done:
                rows.append((row["site"], row["path"]))
    # A URL the corpus holds several pages at (a front page, a board, a settings panel) has one prompt: one job, as
    # a resumed run, which skips every URL it has kept a page for, would give it
    rows = list(dict.fromkeys(rows))
    random.Random(seed).shuffle(rows)
    jobs = []
    for name, path in rows:
        location = runtimes[name].locate(path)
        if location is None:
            continue
        request = runtimes[name].direct_request(location, seed)
        jobs.append(Job(name, path, request.prompt, request.opening or "", sites[name].model.tokens, request))
        if len(jobs) == pages:
            break
    return jobs


def dictionary_share(page: str, dictionary: set[str]) -> float:
    found = [w.lower() for w in words(" ".join(shape(page).text))]
    return sum(w in dictionary for w in found) / len(found) if found else 0.0


@dataclass
class Keeper:
    """Which written pages are kept (sanitised, with their site's skeleton and ``min_words`` dictionary words), and
    how many each site tried and kept; genui distill and genui trajectories keep pages alike."""

    dictionary: set[str]
    min_words: float
    counts: dict[str, list[int]] = field(default_factory=dict)  # site -> [kept, tried]

    def keep(self, job: Job, text: str) -> str | None:
        """The page sanitised if it is kept, else None."""
        page = sanitize_html(text)
        ok = skeleton_ok(job.site, job.path, page) and dictionary_share(page, self.dictionary) >= self.min_words
        count = self.counts.setdefault(job.site, [0, 0])
        count[0] += ok
        count[1] += 1
        return page if ok else None

    def summary(self, jobs: int, seconds: float, out: Path) -> str:
        sites = {site: {"tried": n, "kept": k} for site, (k, n) in sorted(self.counts.items())}
        return json.dumps({"pages": jobs, "seconds": round(seconds, 1), "sites": sites, "out": str(out)})


def write_pages(model: torch.nn.Module, tokenizer, jobs: list[Job], args: argparse.Namespace) -> list[str]:  # type: ignore[no-untyped-def]
    """The writer's pages for a batch of jobs: each opening and what follows it, until the row's end-of-text or its
    budget. Prompts are left-padded so that every row's new text starts at the same column."""
    from engine.causal import encode_prompt, end_of_text
    from engine.generation import left_pad

    eos = end_of_text(tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    prompts = [
        encode_prompt(tokenizer, job.prompt) + tokenizer.encode(job.opening, add_special_tokens=False) for job in jobs
    ]
    input_ids, attention_mask = left_pad(prompts, pad, model.device)
    # A served page's budget holds its opening too (the engine counts it in max_tokens): what follows gets the rest.
    openings = [len(tokenizer.encode(job.opening, add_special_tokens=False)) for job in jobs]
    budgets = [
        max(1, min(job.budget - opened, args.max_new_tokens)) for job, opened in zip(jobs, openings, strict=True)
    ]
    with torch.inference_mode():
        output = model.generate(
            input_ids,
            attention_mask=attention_mask,
            max_new_tokens=max(budgets),
            do_sample=True,
            temperature=args.temperature,
            top_k=args.top_k,
            repetition_penalty=args.repetition_penalty,
            eos_token_id=eos,
            pad_token_id=pad,
        )
    new = output[:, input_ids.shape[1] :]
    return [
        job.opening + tokenizer.decode(row[:budget], skip_special_tokens=True)
        for job, row, budget in zip(jobs, new, budgets, strict=True)
    ]


def load_writer(args: argparse.Namespace, device: torch.device) -> tuple[torch.nn.Module, object, str]:
    """The model that writes, its tokenizer, and the ``source`` its rows are marked with."""
    if args.model:
        from engine.loading import load_model

        loaded = load_model(args.model, device=str(device))
        if loaded.family == "diffusion-gemma":
            raise SystemExit(
                f"genui distill: {args.model} is a DiffusionGemma checkpoint; --model takes a genui adapter"
            )
        return loaded.model, loaded.tokenizer, "self"
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from engine.base import ensure_base
    from lab.adapt import base_source

    base = base_source(args.base or str(ensure_base()), prog="genui distill")
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.bfloat16).to(device).eval()
    return model, tokenizer, "base"


def drop_unfinished_row(path: Path) -> None:
    """Cut ``path`` (JSON lines) after its last complete line: what a killed run wrote of a row is no row."""
    with path.open("rb+") as handle:
        data = handle.read()
        end = data.rfind(b"\n") + 1
        if end != len(data):
            handle.truncate(end)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="genui distill", description=__doc__.split("\n\n")[0].replace("``", ""), allow_abbrev=False
    )
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus.jsonl"), help="from genui corpus")
    parser.add_argument("--out", type=Path, default=Path("data/distilled.jsonl"), help="JSONL to append pages to")
    parser.add_argument("--pages", type=int, default=100, help="training pages to try this run (default 100)")
    writer = parser.add_mutually_exclusive_group()
    writer.add_argument("--base", help="causal-LM folder or hub id that writes (default: the pinned SmolLM2 base)")
    writer.add_argument("--model", help="a genui adapter folder whose causal mode writes (e.g. models/genui-smollm)")
    parser.add_argument("--batch", type=int, default=8, help="pages written at once (default 8)")
    parser.add_argument("--device", help="cpu or cuda (default: cuda when there is one)")
    parser.add_argument("--threads", type=int, help="torch threads on CPU (default: torch's choice)")
    parser.add_argument("--sites-dir", type=Path, default=bundled("sites"))
    parser.add_argument("--max-new-tokens", type=int, default=512, help="at most this many, and the site's budget")
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--top-k", type=int, default=50)
    parser.add_argument("--repetition-penalty", type=float, default=1.2)
    parser.add_argument("--min-words", type=float, default=0.9, help="least share of dictionary words kept")
    parser.add_argument("--site", action="append", help="only this site's pages (repeat for several; default: all)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.pages < 1 or args.max_new_tokens < 1 or args.batch < 1 or not args.temperature > 0:
        parser.error("--pages, --batch and --max-new-tokens must be positive, --temperature above 0")
    if not args.corpus.is_file():
        print(f"genui distill: {args.corpus} is missing: build it with `genui corpus --text-only`", file=sys.stderr)
        return 2
    done: set[tuple[str, str]] = set()
    if args.out.is_file():
        drop_unfinished_row(args.out)  # a run killed while it wrote a row left half of it
        with args.out.open(encoding="utf-8") as handle:
            done = {(row["site"], row["path"]) for row in map(json.loads, handle)}
    keeper = Keeper(load_dictionary(), args.min_words)
    jobs = plan_jobs(args.corpus, args.sites_dir, done, args.pages, args.seed, args.site)

    from tqdm import tqdm

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    model, tokenizer, source = load_writer(args, device)
    if args.threads:  # after loading, which fits torch's threads to the CPUs
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed + len(done))  # a resumed run draws afresh
    started = time.perf_counter()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    bar = tqdm(total=len(jobs), desc="distill", unit="page", file=sys.stderr, mininterval=5)
    with args.out.open("a", encoding="utf-8") as out:
        for first in range(0, len(jobs), args.batch):
            batch = jobs[first : first + args.batch]
            for job, text in zip(batch, write_pages(model, tokenizer, batch, args), strict=True):
                page = keeper.keep(job, text)
                if page is not None:
                    row = {"site": job.site, "path": job.path, "prompt": job.prompt, "html": page, "holdout": False}
                    out.write(json.dumps({**row, "source": source}) + "\n")
            out.flush()
            bar.update(len(batch))
    bar.close()
    print(keeper.summary(len(jobs), time.perf_counter() - started, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
