"""``genui distill``: pages the base model writes itself, as extra targets for the adaptation corpus.

For training pages of the corpus (never held-out ones), the base causal LM gets the page's prompt in its chat
template followed by the route's opening, as a served page starts, and writes the rest autoregressively with
transformers' ``generate()`` (sampling). A page is kept when, sanitised, it has its site's skeleton
(``lab.quality.skeleton_ok``) and at least ``--min-words`` of its words are dictionary words (the quality report's
measure; it drops the base's made-up names and letter soup): the base's own English inside the site's markup, an
easy target that keeps the fluency the adaptation should not lose. Kept pages are corpus rows with ``"source":
"base"``, appended to ``--out`` as they come, so a run can stop at any time and resume: paths already in
``--out`` are not tried again.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

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


def plan_jobs(corpus: Path, sites_dir: Path, done: set[tuple[str, str]], pages: int, seed: int) -> list[Job]:
    """Up to ``pages`` training pages not yet in ``done``, in a seeded order, with the prompt and opening the site
    would send for them."""
    sites = {site.name: site for site in load_sites(sites_dir)}
    runtimes = {name: SiteRuntime.build(site, mount="") for name, site in sites.items()}
    rows = []
    with corpus.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            if not row["holdout"] and row["site"] in runtimes and (row["site"], row["path"]) not in done:
                rows.append((row["site"], row["path"]))
    random.Random(seed).shuffle(rows)
    jobs = []
    for name, path in rows:
        location = runtimes[name].locate(path)
        if location is None:
            continue
        request = runtimes[name].direct_request(location, seed)
        jobs.append(Job(name, path, request.prompt, request.opening or "", sites[name].model.tokens))
        if len(jobs) == pages:
            break
    return jobs


def dictionary_share(page: str, dictionary: set[str]) -> float:
    found = [w.lower() for w in words(" ".join(shape(page).text))]
    return sum(w in dictionary for w in found) / len(found) if found else 0.0


def write_page(model: torch.nn.Module, tokenizer, job: Job, args: argparse.Namespace) -> str:  # type: ignore[no-untyped-def]
    """The base's page for a job: the opening and what it writes after it, until its end-of-text or the budget."""
    from engine.causal import encode_prompt, end_of_text

    ids = encode_prompt(tokenizer, job.prompt) + tokenizer.encode(job.opening, add_special_tokens=False)
    input_ids = torch.tensor([ids], device=model.device)
    budget = min(job.budget, args.max_new_tokens)
    with torch.inference_mode():
        output = model.generate(
            input_ids,
            attention_mask=torch.ones_like(input_ids),
            max_new_tokens=budget,
            do_sample=True,
            temperature=args.temperature,
            top_k=args.top_k,
            repetition_penalty=args.repetition_penalty,
            eos_token_id=end_of_text(tokenizer),
            pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else end_of_text(tokenizer),
        )
    return job.opening + tokenizer.decode(output[0, len(ids) :], skip_special_tokens=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="genui distill", description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=Path("data/corpus.jsonl"), help="from genui corpus")
    parser.add_argument("--out", type=Path, default=Path("data/distilled.jsonl"), help="JSONL to append pages to")
    parser.add_argument("--pages", type=int, default=100, help="training pages to try this run (default 100)")
    parser.add_argument("--base", help="causal-LM folder or hub id (default: the pinned SmolLM2 base)")
    parser.add_argument("--device", help="cpu or cuda (default: cuda when there is one)")
    parser.add_argument("--threads", type=int, help="torch threads on CPU (default: torch's choice)")
    parser.add_argument("--sites-dir", type=Path, default=bundled("sites"))
    parser.add_argument("--max-new-tokens", type=int, default=512, help="at most this many, and the site's budget")
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--top-k", type=int, default=50)
    parser.add_argument("--repetition-penalty", type=float, default=1.2)
    parser.add_argument("--min-words", type=float, default=0.9, help="least share of dictionary words kept")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.pages < 1 or args.max_new_tokens < 1 or not args.temperature > 0:
        parser.error("--pages and --max-new-tokens must be positive, --temperature above 0")
    if not args.corpus.is_file():
        print(f"genui distill: {args.corpus} is missing: build it with `genui corpus --text-only`", file=sys.stderr)
        return 2
    done: set[tuple[str, str]] = set()
    if args.out.is_file():
        with args.out.open(encoding="utf-8") as handle:
            done = {(row["site"], row["path"]) for row in map(json.loads, handle)}
    dictionary = load_dictionary()
    jobs = plan_jobs(args.corpus, args.sites_dir, done, args.pages, args.seed)

    from tqdm import tqdm
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from engine.base import ensure_base

    if args.threads:
        torch.set_num_threads(args.threads)
    base = args.base or str(ensure_base())
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.bfloat16).to(device).eval()
    torch.manual_seed(args.seed + len(done))  # a resumed run draws afresh
    kept: dict[str, list[int]] = {}
    started = time.perf_counter()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a", encoding="utf-8") as out:
        for job in tqdm(jobs, desc="distill", unit="page", file=sys.stderr, mininterval=5):
            page = sanitize_html(write_page(model, tokenizer, job, args))
            ok = skeleton_ok(job.site, job.path, page) and dictionary_share(page, dictionary) >= args.min_words
            kept.setdefault(job.site, [0, 0])[0] += ok
            kept[job.site][1] += 1
            if ok:
                row = {"site": job.site, "path": job.path, "prompt": job.prompt, "html": page, "holdout": False}
                out.write(json.dumps({**row, "source": "base"}) + "\n")
                out.flush()
    seconds = time.perf_counter() - started
    summary = {site: {"tried": n, "kept": k} for site, (k, n) in sorted(kept.items())}
    print(json.dumps({"pages": len(jobs), "seconds": round(seconds, 1), "sites": summary, "out": str(args.out)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
