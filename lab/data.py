"""The packed training set: token ids of (prompt, response) pairs in one compact .npz file.

A packed file is what travels to a GPU machine with no network: tens of MB, no text processing needed there.
The engine knows nothing of sites or HTML here; a "group" is an opaque label used for per-group reports.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from transformers import PreTrainedTokenizerBase

from engine.config import EOS_ID
from engine.gemma import encode_prompt


@dataclass(frozen=True, slots=True)
class Packed:
    prompts: np.ndarray  # (N_prompt_tokens,) uint16, or uint32 for a vocabulary past 65,536 tokens
    prompt_offsets: np.ndarray  # (N+1,) int64
    responses: np.ndarray  # (N_response_tokens,) as prompts, each response ends with <eos>
    response_offsets: np.ndarray  # (N+1,) int64
    groups: np.ndarray  # (N,) int16 index into group_names
    holdout: np.ndarray  # (N,) bool
    group_names: tuple[str, ...]
    tokenizer: str = ""  # tokenizer_digest() of the tokenizer it was packed with ("" in packs from before session 63)

    def __len__(self) -> int:
        return len(self.groups)

    def fingerprint(self) -> str:
        """A short digest of the pack's rows and split: a run resumed on another pack (rebuilt, or of another
        split) would read its training order and held-out rows against rows they were not drawn from."""
        digest = hashlib.sha1()
        for array in (self.prompt_offsets, self.response_offsets, self.responses, self.groups, self.holdout):
            digest.update(np.ascontiguousarray(array).tobytes())
        return digest.hexdigest()[:16]

    def prompt(self, i: int) -> np.ndarray:
        return self.prompts[self.prompt_offsets[i] : self.prompt_offsets[i + 1]]

    def response(self, i: int) -> np.ndarray:
        return self.responses[self.response_offsets[i] : self.response_offsets[i + 1]]

    def subset(self, rows: list[int], prompts_from: list[int] | None = None) -> Packed:
        """The given rows, all held out; with ``prompts_from``, row k gets the prompt of row ``prompts_from[k]``
        (a shuffled pairing measures how much the model reads its prompt)."""
        sources = rows if prompts_from is None else prompts_from
        prompts = [self.prompt(i) for i in sources]
        responses = [self.response(i) for i in rows]
        return Packed(
            np.concatenate(prompts),
            np.cumsum([0, *map(len, prompts)]),
            np.concatenate(responses),
            np.cumsum([0, *map(len, responses)]),
            self.groups[rows],
            np.ones(len(rows), bool),
            self.group_names,
            self.tokenizer,
        )

    def save(self, path: Path) -> None:
        """Write the pack beside ``path`` and move it into place whole: a killed save leaves no broken .npz."""
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial.npz")  # savez adds .npz to a name without it
        np.savez_compressed(
            partial,
            prompts=self.prompts,
            prompt_offsets=self.prompt_offsets,
            responses=self.responses,
            response_offsets=self.response_offsets,
            groups=self.groups,
            holdout=self.holdout,
            group_names=np.array(self.group_names),
            tokenizer=np.array(self.tokenizer),
        )
        partial.replace(path)

    @classmethod
    def load(cls, path: Path) -> Packed:
        with np.load(path) as z:
            return cls(
                z["prompts"],
                z["prompt_offsets"],
                z["responses"],
                z["response_offsets"],
                z["groups"],
                z["holdout"],
                tuple(str(g) for g in z["group_names"]),
                str(z["tokenizer"]) if "tokenizer" in z else "",
            )


def pack_jsonl(path: Path, tokenizer: PreTrainedTokenizerBase, max_prompt: int, max_response: int) -> Packed:
    """Tokenise a JSONL corpus ({"site", "prompt", "html", "holdout"} rows). Longer rows are dropped, not cut:
    a cut page would teach the model unclosed HTML."""
    prompts: list[int] = []
    responses: list[int] = []
    p_off, r_off, groups, held = [0], [0], [], []
    names: dict[str, int] = {}
    with path.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            p = encode_prompt(tokenizer, row["prompt"])
            r = [*tokenizer.encode(row["html"], add_special_tokens=False), EOS_ID]
            if len(p) > max_prompt or len(r) > max_response:
                continue
            prompts += p
            responses += r
            p_off.append(len(prompts))
            r_off.append(len(responses))
            groups.append(names.setdefault(row["site"], len(names)))
            held.append(bool(row["holdout"]))
    return Packed(
        np.array(prompts, np.uint16),
        np.array(p_off, np.int64),
        np.array(responses, np.uint16),
        np.array(r_off, np.int64),
        np.array(groups, np.int16),
        np.array(held, bool),
        tuple(names),
    )


def _rows(files: list[Path]) -> Iterator[dict[str, Any]]:
    """Each file's rows; a last line with no line break after it that is not whole JSON is one a killed writer
    (genui distill) did not finish, and is left out."""
    for path in files:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    if line.endswith("\n"):
                        raise


@dataclass(frozen=True)
class Repeat:
    """Training pages of one site whose path, without its query or with it, fully matches ``path``, packed ``times``
    times over; with ``html``, only those whose page also holds a match of it (a page's shape, not its route:
    ``</p>.*<p>`` for two paragraphs). ``text`` is the repeat as written, to name it in errors."""

    site: str
    path: re.Pattern[str]
    times: int
    html: re.Pattern[str] | None = None
    text: str = field(default="", compare=False)

    @classmethod
    def parse(cls, text: str) -> Repeat:
        """``SITE:PATH_REGEX=N`` or ``SITE:PATH_REGEX~HTML_REGEX=N``, e.g. ``os:/settings/.*=4``."""
        spec, equals, times = text.rpartition("=")
        site, colon, rest = spec.partition(":")
        path, tilde, html = rest.partition("~")
        if not (equals and colon and site and path and times.isdecimal() and times.isascii() and int(times) >= 1):
            raise ValueError(
                f"--repeat {text!r}: write SITE:PATH_REGEX=N or SITE:PATH_REGEX~HTML_REGEX=N, e.g. {_EXAMPLE}"
            )
        if tilde and not html:
            raise ValueError(
                f"--repeat {text!r}: nothing after the ~: write the HTML_REGEX there, e.g. {_EXAMPLE_HTML}"
            )
        return cls(
            site,
            _compile(text, "PATH_REGEX", path),
            int(times),
            _compile(text, "HTML_REGEX", html, re.S) if tilde else None,
            text,
        )

    def matches(self, row: dict[str, Any]) -> bool:
        path = str(row.get("path", ""))
        return (
            row["site"] == self.site
            # the path alone, or with its query when the regex names one (os:/terminal\?cmd=ls)
            and (self.path.fullmatch(path.partition("?")[0]) or self.path.fullmatch(path)) is not None
            and (self.html is None or self.html.search(str(row.get("html", ""))) is not None)
        )


def _compile(text: str, what: str, pattern: str, flags: int = 0) -> re.Pattern[str]:
    try:
        return re.compile(pattern, flags)
    except re.error as e:
        raise ValueError(f"--repeat {text!r}: {what} {pattern!r} is not a regular expression ({e})") from e


_EXAMPLE = "os:/settings/.*=4"
_EXAMPLE_HTML = "'wiki:/wiki/.*~</p>.*<p>=2' (articles of two paragraphs or more)"


def _refuse_training_held_elsewhere(files: list[Path]) -> None:
    """A page one file trains on at a URL that another holds out would leak that page's prompt into training:
    pages distilled or traced against a corpus of another split (``genui corpus --split``). ValueError, naming
    both files and a page. Within one file its split decides: a shared URL may be held out in some copies alone."""
    held: dict[tuple[str, str], Path] = {}
    for path in files:
        held_here, trained_here = set(), set()
        for row in _rows([path]):
            (held_here if row["holdout"] else trained_here).add((row["site"], row["path"]))
        for key in held_here - trained_here:  # a URL the file trains on in other copies is no held-out page of its
            held.setdefault(key, path)
    for path in files:
        clashes = [
            row for row in _rows([path]) if not row["holdout"] and held.get((row["site"], row["path"]), path) != path
        ]
        if clashes:
            first = clashes[0]
            raise ValueError(
                f"{path} trains on {len(clashes)} page(s) at URLs that {held[(first['site'], first['path'])]} holds "
                f"out ({first['site']} {first['path']}): it was made against a corpus of another split; make it "
                "again from this corpus (genui distill, genui trajectories)"
            )


def tokenizer_digest(tokenizer: PreTrainedTokenizerBase) -> str:
    """A short digest of a tokenizer's vocabulary: a pack's token ids mean its words only to that tokenizer."""
    vocabulary = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    return hashlib.sha1(json.dumps(vocabulary, ensure_ascii=False).encode()).hexdigest()[:16]


def pack_corpus(
    corpus: Path | list[Path], tokenizer_dir: Path, max_prompt: int, max_response: int, repeats: Sequence[Repeat] = ()
) -> tuple[Packed, int]:
    """Every (prompt, page) of corpus JSONL files in the base's own format: its chat template, the page,
    end-of-text; and how many rows were left out as too long. A page of more than ``max_response`` tokens with its
    end-of-text is left out, not cut: a cut page would teach the model to end a page anywhere, its HTML unclosed
    (until session 54 it was cut, and 1,767 of 15,924 forum pages ended so). A training page that a ``repeats``
    entry matches is packed that many times (the first match counts); held-out pages once. A repeat that no
    training page matches at all is a mistake (a site or a path misspelt), so it raises ValueError."""
    from transformers import AutoTokenizer

    from engine.causal import encode_prompt, end_of_text

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    eos = end_of_text(tokenizer)
    ids = np.uint16 if len(tokenizer) <= 1 << 16 else np.uint32  # a Qwen's 151,936 ids overflowed uint16
    prompts: list[np.ndarray] = []
    responses: list[np.ndarray] = []
    groups: list[int] = []
    held: list[bool] = []
    names: list[str] = []
    unmatched = set(repeats)
    too_long = 0
    files = corpus if isinstance(corpus, list) else [corpus]
    _refuse_training_held_elsewhere(files)
    for row in _rows(files):
        prompt = encode_prompt(tokenizer, row["prompt"])
        response = tokenizer.encode(row["html"], add_special_tokens=False) + [eos]
        if len(prompt) > max_prompt or len(response) > max_response:
            too_long += 1
            continue
        if row["site"] not in names:
            names.append(row["site"])
        matching = [] if row["holdout"] else [r for r in repeats if r.matches(row)]
        unmatched.difference_update(matching)
        times = matching[0].times if matching else 1
        prompts += [np.asarray(prompt, dtype=ids)] * times
        responses += [np.asarray(response, dtype=ids)] * times
        groups += [names.index(row["site"])] * times
        held += [bool(row["holdout"])] * times
    if unmatched:
        said = ", ".join(repr(r.text) for r in repeats if r in unmatched)
        raise ValueError(f"--repeat {said}: no training page of the corpus matches it (sites: {', '.join(names)})")
    packed = Packed(
        np.concatenate(prompts),
        np.cumsum([0, *map(len, prompts)]),
        np.concatenate(responses),
        np.cumsum([0, *map(len, responses)]),
        np.asarray(groups, dtype=np.int16),
        np.asarray(held, dtype=bool),
        tuple(names),
        tokenizer_digest(tokenizer),
    )
    return packed, too_long
