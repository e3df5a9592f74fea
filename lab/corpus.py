"""The training corpus: (prompt, page HTML) pairs for the example sites, built from text Debian packages ship.

Sources (install them with ``apt-get install dict-foldoc dict-jargon fortunes``; package descriptions come from
``apt-cache dumpavail`` and apt's English translation lists, file paths from dpkg's lists):

- FOLDOC and the Jargon File (dictd databases) -> wiki articles, search pages, forum "what is" threads;
- fortunes -> forum posts and replies, desktop notes;
- Debian package descriptions and installed file lists (each package's first 150 paths) -> OS file manager, viewer
  and terminal screens;
- all three -> users' home folders on the desktop (notes, to-do lists, documents, downloads), /home/user's written
  many times over, since the desktop's icons open it.

Every prompt is rendered through the site's own prompt template (genui.prompts), so the model learns exactly the
prompts the framework sends. The split is fixed, by hash, and one of two (SPLITS, ``--split``): by URL (a hash of a
page's site and path; every corpus until session 54, the shipped adapter's included) or by source item (every page
made from a held-out dictionary entry, fortune, package or folder is held out, by_item).
"""

from __future__ import annotations

import argparse
import functools
import gzip
import hashlib
import html
import json
import random
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from genui.cache import counted
from genui.prompts import Parent, Post, PromptRenderer
from genui.resources import bundled
from genui.sites import Route, Site, load_sites

DICTD = Path("/usr/share/dictd")
FORTUNES = Path("/usr/share/games/fortunes")
DPKG_INFO = Path("/var/lib/dpkg/info")
PATHS_PER_PACKAGE = 150  # read_file_tree: 2,946 folders with files from 838 packages on the machine of session 28
HOLDOUT_PER_MILLE = 8  # ~0.8% of pages, chosen by hash: the same pages on every machine
_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_TITLE_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._()'+-]{0,60}$")


@dataclass(frozen=True, slots=True)
class Example:
    site: str
    path: str  # the page's path within its site, query included
    prompt: str
    html: str
    holdout: bool
    # A page of a URL that many pages share (a home screen, a forum board, a settings panel): every distinct one
    # is kept, so the model sees what such a page may hold and not the one the builder wrote first.
    shared: bool = False


@dataclass(frozen=True, slots=True)
class Entry:
    """One dictionary entry: a title, body paragraphs (with {cross references}) and categories."""

    title: str
    paragraphs: tuple[str, ...]
    refs: tuple[str, ...]
    categories: tuple[str, ...]


# ---------------------------------------------------------------------------------------------------------------
# Sources


def _b64(s: str) -> int:
    n = 0
    for c in s:
        n = n * 64 + _B64.index(c)
    return n


def read_dictd(name: str) -> Iterator[str]:
    """Raw entry texts of a dictd database (the .dict.dz file is gzip-compatible)."""
    with gzip.open(DICTD / f"{name}.dict.dz") as f:
        data = f.read()
    for line in (DICTD / f"{name}.index").read_text(encoding="utf-8").splitlines():
        word, offset, length = line.split("\t")[:3]
        if word.startswith("00database"):
            continue
        yield data[_b64(offset) : _b64(offset) + _b64(length)].decode("utf-8", "replace")


def parse_entry(raw: str, jargon: bool) -> Entry | None:
    lines = raw.strip("\n").split("\n")
    title = lines[0].strip()
    body: list[str] = []
    current: list[str] = []
    for line in lines[1:]:
        text = line.strip()
        if not line.startswith(" ") and text and not current and not body:
            continue  # FOLDOC's alternative headwords
        if not text:
            if current:
                body.append(" ".join(current))
                current = []
            continue
        current.append(text)
    if current:
        body.append(" ".join(current))
    categories: list[str] = []
    paragraphs: list[str] = []
    for para in body:
        if re.fullmatch(r"\(\d{4}-\d{2}-\d{2}\)", para) or re.fullmatch(r"\[[^\]]*\]\.?", para):
            continue  # dates and citations
        if any(mark in para for mark in ("http", "ftp:", "@", "E-mail", "Address:", "Tel:")):
            continue  # addresses age badly and teach the model foreign URLs
        if (
            jargon
            and not paragraphs
            and (para.endswith((", n.", ", adj.", ", vt.", ", vi.")) or re.fullmatch(r"[a-z. ,]+", para))
        ):
            continue  # pronunciation and part of speech
        # FOLDOC's domain markers ("<language>") start a paragraph, or a sense after its number ("2. <language>
        # An ...") or its acronym ("<processor> (NS32000) <processor> The ..."): they are categories, not text.
        while m := re.match(r"^(\d+\.\s+|\([^()<>]*\)\s+)?((?:<[^>]+>\s*)+)", para):
            categories += [c.strip() for tag in re.findall(r"<([^>]+)>", m.group(2)) for c in tag.split(",")]
            para = (m.group(1) or "") + para[m.end() :].strip()
        para = re.sub(r"\s+", " ", para)
        if para:
            paragraphs.append(para)
    refs = tuple(dict.fromkeys(r.strip() for p in paragraphs for r in re.findall(r"\{([^{}]+)\}", p)))
    text_len = sum(len(p) for p in paragraphs)
    if not paragraphs or text_len < 80 or not _TITLE_OK.match(title):
        return None
    return Entry(title=title, paragraphs=tuple(paragraphs), refs=refs, categories=tuple(dict.fromkeys(categories)))


def read_fortunes(max_len: int = 400) -> dict[str, list[str]]:
    """Fortune cookies by file (board), short ones only, offensive collections excluded (not installed by default)."""
    boards: dict[str, list[str]] = {}
    for path in sorted(FORTUNES.glob("*")):
        if path.suffix or not path.is_file() or path.name in ("ascii-art", "art", "translate-me"):
            continue
        items = path.read_text(encoding="utf-8", errors="replace").split("\n%\n")
        keep = [re.sub(r"\s+", " ", t).strip() for t in items if 20 <= len(t.strip()) <= max_len]
        if len(keep) >= 20:
            boards[path.name.replace("-", "_")] = keep
    return boards


@dataclass(frozen=True, slots=True)
class Package:
    name: str
    version: str
    section: str
    summary: str
    description: str


APT_LISTS = Path("/var/lib/apt/lists")


def _stanzas(text: str) -> Iterator[dict[str, str]]:
    """The fields of each stanza of a Debian control file (continuation lines joined with newlines)."""
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        key = ""
        for line in stanza.split("\n"):
            if line.startswith(" ") and key:
                fields[key] += "\n" + line[1:]
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        yield fields


def read_translations(lists: Path = APT_LISTS) -> dict[str, str]:
    """Package descriptions in full from apt's English translation lists. Debian's Packages lists carry only a
    summary line, so ``apt-cache dumpavail`` has no long description; images that drop translations (Debian's
    Docker images do) get them with ``apt-get update -o Acquire::Languages=en``. apt keeps lists compressed as it
    likes; apt-helper reads any of them."""
    descriptions: dict[str, str] = {}
    for file in sorted(lists.glob("*_i18n_Translation-en*")):
        text = subprocess.run(
            ["/usr/lib/apt/apt-helper", "cat-file", str(file)], capture_output=True, text=True, check=True
        ).stdout
        for fields in _stanzas(text):
            if "Package" in fields and "Description-en" in fields:
                descriptions.setdefault(fields["Package"], fields["Description-en"])
    return descriptions


def read_packages(limit: int = 20000) -> list[Package]:
    """Packages with a long description (from the translation lists where the package list has none)."""
    out = subprocess.run(["apt-cache", "dumpavail"], capture_output=True, text=True, check=True).stdout
    translations = read_translations()
    packages: list[Package] = []
    for fields in _stanzas(out):
        if "Package" not in fields:
            continue
        desc = fields.get("Description", "")
        if "\n" not in desc:  # a summary only
            desc = translations.get(fields["Package"], desc)
        summary, _, rest = desc.partition("\n")
        rest = "\n".join("" if line.strip() == "." else line.strip() for line in rest.split("\n")).strip()
        if len(rest) < 60:
            continue
        packages.append(
            Package(
                fields["Package"], fields.get("Version", "1.0"), fields.get("Section", "misc"), summary.strip(), rest
            )
        )
        if len(packages) >= limit:
            break
    if len(packages) < 100:
        print(
            f"only {len(packages)} packages have a long description: the viewer and `apt show` pages will be few. "
            "Fetch apt's English descriptions with `apt-get update -o Acquire::Languages=en`",
            file=sys.stderr,
        )
    return packages


def read_file_tree(per_package: int = PATHS_PER_PACKAGE, info: Path = DPKG_INFO) -> dict[str, set[str]]:
    """Directory -> children, from the lists of installed Debian packages: the first ``per_package`` paths of each.
    dpkg lists a package's folders before its files, so those are its shallow ones; and no one package (an SDK of
    50,000 files) fills the desktop. Until session 28 the tree took whole lists in name order up to 60,000 paths, so it
    held the first 112 of 838 packages here, and two-fifths of the desktop's pages were one SDK's folders."""
    tree: dict[str, set[str]] = {}
    for lst in sorted(info.glob("*.list")):
        taken = 0
        for line in lst.read_text(errors="replace").splitlines():
            if taken >= per_package:
                break
            if not line.startswith("/") or line == "/." or not re.fullmatch(r"[A-Za-z0-9/._+-]+", line):
                continue
            parent, _, name = line.rpartition("/")
            tree.setdefault(parent or "/", set()).add(name)
            taken += 1
    return tree


# ---------------------------------------------------------------------------------------------------------------
# Page builders


def _text(value: str) -> str:
    """`value` as an element's text: `&`, `<` and `>` escaped, quotes written as they are. SmolLM2's tokenizer
    reads `"` and `'t` as one token each, and `&quot;` and `&#x27;t` as four and seven: the escaped forms, in one
    page of three before session 31, were where the forum's replies looped (`&quot;&quot;&quot;`, `Spockquot;`)."""
    return html.escape(value, quote=False)


def _attribute(value: str) -> str:
    """`value` fit for a double-quoted attribute; a name with `'` in it is written as it was."""
    return _text(value).replace('"', "&quot;")


def slug(title: str) -> str:
    return quote(title.replace(" ", "_"), safe="_-.()'+")


def _words(rng: random.Random, words: list[str]) -> str:
    return rng.choice(words)


def name_words(words: Iterable[str]) -> list[str]:
    """The words user names and home folders are made of: short lower-case words, less those better-profanity lists
    (wamerican holds slurs, and a user name is shown on every post and in the desktop's /home)."""
    try:
        from better_profanity import profanity  # only the corpus builder needs it (a dev extra)
    except ImportError as exc:
        raise SystemExit(f"genui corpus needs better-profanity: pip install 'genui[dev]' ({exc})") from exc

    return [
        w for w in words if w.isalpha() and w.islower() and 3 <= len(w) <= 7 and not profanity.contains_profanity(w)
    ]


def username(rng: random.Random, words: list[str]) -> str:
    return f"{rng.choice(words)}_{rng.choice(words)}{rng.randint(1, 99) if rng.random() < 0.5 else ''}"


HOME_USER = "user"  # whose home folder the desktop's icons open (sites/os/site.toml)

# Routes with few URLs, each written many times over by the builder (Example.shared).
SHARED_URLS = {("wiki", "/"), ("forum", "/"), ("forum", "/r/{board}"), ("os", "/"), ("os", "/settings/{panel}")}


def _hashed_out(key: str) -> bool:
    return int(hashlib.sha1(key.encode()).hexdigest()[:6], 16) % 1000 < HOLDOUT_PER_MILLE


def holdout(site: str, path: str) -> bool:
    """Whether the page at this URL is held out by URL (by_url)."""
    return _hashed_out(f"{site}{path}")


# What a page is made from, by identity: the same item under every route that shows it.
def entry_item(entry: Entry) -> str:
    return f"entry:{entry.title.lower()}"


def fortune_item(text: str) -> str:
    return f"fortune:{text}"


def package_item(pkg: Package) -> str:
    return f"package:{pkg.name}"


def folder_item(directory: str) -> str:
    """A folder's listing, which the file manager and ``ls`` both show."""
    return f"folder:{directory}"


def item_held_out(item: str) -> bool:
    return _hashed_out(item)


# A split says whether a page is held out from its site, its path and the items it is made from.
Split = Callable[[str, str, Sequence[str]], bool]


def by_url(site: str, path: str, items: Sequence[str]) -> bool:
    """Held out when a hash of the page's URL says so. One item feeds pages at several URLs (an entry's article, its
    page in the desktop's browser, a "What is" thread, a Documents file), so held-out pages share text with training
    ones (docs/model.md, session 53). The shipped adapter was trained on this split."""
    return holdout(site, path)


def by_item(site: str, path: str, items: Sequence[str]) -> bool:
    """Held out when any item the page is made from is held out, so no training page shows a held-out item's text.

    A page's items are those whose text it shows: an entry's paragraphs, a fortune, a package's summary or
    description, a folder's listing; drawn for the page, whether or not its character budget kept them all. Names
    are not items: a title in a link, a "See also" list, a thread list, a reading list or a file name. Counting them
    would hold out most of the wiki, whose articles link each other's titles, and every listing.

    A page of several items is held out when any of them is, rather than by its first: otherwise a training thread
    could answer with a held-out fortune. This holds out more of the routes that draw several items (search pages
    up to six entries, 2.6% of them; threads three to seven items, 3.0%) and keeps the routes of one item at
    HOLDOUT_PER_MILLE: 1.9% of the corpus in all, against 0.9% by URL (docs/model.md, session 54). The other way
    does not hold: a page held out for one item may show others that training pages show. A page made from no item
    (a settings panel, a thread list) is held out by its URL."""
    return any(item_held_out(item) for item in items) if items else holdout(site, path)


SPLITS: dict[str, Split] = {"url": by_url, "item": by_item}


@dataclass
class Sources:
    """What the builder writes pages from: dictionary entries by lower-cased title, fortunes by file, packages, the
    file tree (directory -> names) and words for user names."""

    entries: dict[str, Entry]
    fortunes: dict[str, list[str]]
    packages: list[Package]
    tree: dict[str, set[str]]
    names: list[str]

    @classmethod
    def read(cls) -> Sources:
        """This machine's Debian packages (the module's docstring says which)."""
        wanted = {"dict-foldoc": DICTD / "foldoc.index", "dict-jargon": DICTD / "jargon.index", "fortunes": FORTUNES}
        missing = [package for package, path in wanted.items() if not path.exists()]
        if missing:  # else a FileNotFoundError on the first, or an empty forum's IndexError without fortunes
            raise SystemExit(
                f"genui corpus: the corpus is written from Debian's packaged text, and this machine lacks"
                f" {', '.join(missing)}"
                f": apt-get install {' '.join(missing)} (docs/model.md, Recipe)"
            )
        entries: dict[str, Entry] = {}
        for name in ("foldoc", "jargon"):
            for raw in read_dictd(name):
                entry = parse_entry(raw, jargon=name == "jargon")
                if entry and entry.title.lower() not in entries:
                    entries[entry.title.lower()] = entry
        words = Path("/usr/share/dict/words")
        names = name_words(words.read_text().split()) if words.exists() else ["user"]
        return cls(entries, read_fortunes(), read_packages(), read_file_tree(), names)


class Builder:
    """Builds the examples of all three sites from the sources (read from Debian's packages unless given), with one
    seeded RNG, and holds them out by ``split``. The split draws nothing: a corpus's pages are the same under both."""

    def __init__(
        self,
        sites: dict[str, Site],
        seed: int = 0,
        char_budget: int = 1400,
        sources: Sources | None = None,
        split: Split = by_url,
    ) -> None:
        sources = sources or Sources.read()
        self.sites = sites
        self.split = split
        self.renderers = {name: PromptRenderer(site) for name, site in sites.items()}
        self.seed = seed
        self.rng = random.Random(seed)
        self.budget = char_budget
        self.entries = sources.entries
        self.linked_from: dict[str, list[str]] = {}
        for entry in self.entries.values():
            for ref in entry.refs:
                self.linked_from.setdefault(ref.lower(), []).append(entry.title)
        self.fortunes = sources.fortunes
        self.packages = sources.packages
        self.tree = sources.tree
        self.names = sources.names

    # -- helpers --------------------------------------------------------------------------------------------

    def _route(self, site: str, pattern: str) -> Route:
        return next(r for r in self.sites[site].routes if r.pattern == pattern)

    def _example(
        self,
        site: str,
        pattern: str,
        path: str,
        params: dict[str, str],
        body: str,
        query: dict[str, str] | None = None,
        parent: Parent | None = None,
        posts: list[Post] | None = None,
        shared: bool = False,
        items: Sequence[str] = (),
    ) -> Example:
        """The page at ``path``; ``items`` are what it is made from (by_item says which count)."""
        prompt = self.renderers[site].render(self._route(site, pattern), params, query, parent, posts)
        shared = shared or (site, pattern) in SHARED_URLS
        held = self.split(site, path, items)
        return Example(site=site, path=path, prompt=prompt, html=body, holdout=held, shared=shared)

    def _linkify(self, text: str) -> str:
        def link(m: re.Match[str]) -> str:
            ref = m.group(1).strip()
            target = self.entries.get(ref.lower())
            if target is None:
                return _text(ref)
            return f'<a href="/wiki/{slug(target.title)}">{_text(ref)}</a>'

        return re.sub(r"\{([^{}]+)\}", link, _text(text))

    def _plain(self, text: str) -> str:
        return _text(re.sub(r"\{([^{}]+)\}", r"\1", text))

    def _fit(self, head: str, parts: list[str], tail: str) -> str:
        """Whole paragraphs while they fit the character budget (a page is at most two canvases)."""
        out: list[str] = []
        size = len(head) + len(tail)
        for part in parts:
            if size + len(part) > self.budget and out:
                break
            out.append(part)
            size += len(part)
        return head + "".join(out) + tail

    # -- wiki -------------------------------------------------------------------------------------------------

    def wiki_article(self, entry: Entry) -> Example:
        paras = [f"<p>{self._linkify(p)}</p>\n" for p in entry.paragraphs]
        if len(paras) < 2:
            sentences = re.split(r"(?<=[.!?]) (?=[A-Z])", entry.paragraphs[0])
            if len(sentences) >= 2:
                half = (len(sentences) + 1) // 2
                paras = [f"<p>{self._linkify(' '.join(s))}</p>\n" for s in (sentences[:half], sentences[half:])]
        cats = ", ".join(c for c in entry.categories if c.isascii())
        if cats and len(paras) < 3:
            paras.append(f'<p class="categories">Categories: {_text(cats)}</p>\n')
        see = [self.entries[r.lower()].title for r in entry.refs if r.lower() in self.entries][:5]
        tail = ""
        if see:
            items = "".join(f'<li><a href="/wiki/{slug(t)}">{_text(t)}</a></li>' for t in see)
            tail = f"<h2>See also</h2>\n<ul>{items}</ul>\n"
        body = self._fit(f'<article class="wiki">\n<h1>{_text(entry.title)}</h1>\n', paras, tail + "</article>")
        parent = None
        sources = self.linked_from.get(entry.title.lower())
        if sources and self.rng.random() < 0.5:
            p = self.rng.choice(sources)
            parent = Parent(path=f"/wiki/{slug(p)}", title=p)
        s = slug(entry.title)
        return self._example(
            "wiki", "/{title}", f"/wiki/{s}", {"title": s}, body, parent=parent, items=[entry_item(entry)]
        )

    def wiki_search(self, query: str) -> Example | None:
        q = query.lower()
        hits = [e for e in self.entries.values() if q in e.title.lower()][:6]
        hits += [e for e in self.entries.values() if q in e.paragraphs[0].lower() and e not in hits][: 6 - len(hits)]
        if not hits:
            return None
        items = []
        for e in hits:
            first = re.split(r"(?<=[.!?]) ", e.paragraphs[0])[0][:160]
            items.append(f'<li><a href="/wiki/{slug(e.title)}">{_text(e.title)}</a><p>{self._plain(first)}</p></li>\n')
        body = self._fit(
            f'<div class="search">\n<h1>Search results for “{_text(query)}”</h1>\n<ul class="results">\n',
            items,
            "</ul>\n</div>",
        )
        path = f"/search?q={quote(query)}"
        made_of = [entry_item(e) for e in hits]
        return self._example("wiki", "/search", path, {}, body, query={"q": query}, items=made_of)

    def wiki_home(self) -> Example:
        featured = self.rng.choice([e for e in self.entries.values() if len(e.paragraphs[0]) > 150])
        others = self.rng.sample(list(self.entries.values()), 5)
        items = "".join(f'<li><a href="/wiki/{slug(e.title)}">{_text(e.title)}</a></li>' for e in others)
        site = self.sites["wiki"]
        body = (
            f'<div class="home">\n<h1>Welcome to {_text(site.title)}</h1>\n<p>{_text(site.brief)}</p>\n'
            f'<h2>Featured article: <a href="/wiki/{slug(featured.title)}">{_text(featured.title)}</a></h2>\n'
            f"<p>{self._linkify(featured.paragraphs[0][:600])}</p>\n<h2>Other articles</h2>\n<ul>{items}</ul>\n</div>"
        )
        return self._example("wiki", "/", "/", {}, body, items=[entry_item(featured)])

    # -- forum ------------------------------------------------------------------------------------------------

    def _meta(self, user: str, points: int) -> str:
        return f'<p class="meta"><b>{user}</b> · {counted(points, "point")}</p>'

    def forum_thread(self, board: str) -> Example:
        rng = self.rng
        pool = self.fortunes[board]
        items: list[str] = []
        if rng.random() < 0.35:
            entry = rng.choice(list(self.entries.values()))
            title = f"What is {entry.title}?"
            post = rng.choice(
                [
                    "Someone at work keeps saying it. What does it mean?",
                    "I saw this in an old manual. Can anyone explain?",
                    "Heard it on a mailing list today. Is it still used?",
                    "New here. What does it mean and where does it come from?",
                ]
            )
            told = [rng.choice(pool) for _ in range(3)]
            answers = [self._plain(entry.paragraphs[0][:350])] + [_text(t) for t in told]
            answered = [entry_item(entry)] + [fortune_item(t) for t in told]  # the item of each answer
        else:
            text = rng.choice(pool)
            items.append(fortune_item(text))
            words = re.sub(r"[^A-Za-z0-9' ]", "", text).split()[: rng.randint(3, 7)]
            if len(words) < 3:
                words = ["A", "thought", "for", "today"]
            title = " ".join(words)
            post = _text(text)
            told = [rng.choice(pool) for _ in range(4)]
            answers = [_text(t) for t in told]
            answered = [fortune_item(t) for t in told]
        title = title[:70]
        user = username(rng, self.names)
        posts: list[Post] = []
        if rng.random() < 0.2:
            poster = username(rng, self.names)
            quoted = rng.choice(pool)
            items.append(fortune_item(quoted))
            posts = [Post(user=poster, text=quoted[:200])]
            answers[0] = f"@{posts[0].user} {answers[0]}"
        replies = []
        shown = rng.randint(2, 4)
        items += answered[:shown]
        for i, answer in enumerate(answers[:shown]):
            reply = f'<div class="reply">{self._meta(username(rng, self.names), rng.randint(0, 40))}<p>{answer}</p>'
            if i == 0 and rng.random() < 0.5:
                meta = self._meta(username(rng, self.names), rng.randint(0, 9))
                nested = rng.choice(pool)
                items.append(fortune_item(nested))
                reply += f'<div class="reply">{meta}<p>{_text(nested)}</p></div>'
            replies.append(reply + "</div>\n")
        head = (
            f'<div class="thread">\n<h1>{_text(title)}</h1>\n<div class="post"><p class="meta">posted by '
            f'<b>{user}</b> in <a href="/r/{board}">{board}</a> · {counted(rng.randint(1, 99), "point")}</p>'
            f"<p>{post}</p></div>\n"
            f'<div class="replies">\n'
        )
        body = self._fit(head, replies, "</div>\n</div>")
        s = slug(title)
        return self._example(
            "forum",
            "/r/{board}/{thread}",
            f"/r/{board}/{s}",
            {"board": board, "thread": s},
            body,
            posts=posts,
            items=items,
        )

    def _thread_list(self, boards: list[str], n: int) -> str:
        rng = self.rng
        items = []
        for _ in range(n):
            board = rng.choice(boards)
            text = rng.choice(self.fortunes[board])
            title = " ".join(re.sub(r"[^A-Za-z0-9' ]", "", text).split()[: rng.randint(3, 7)]) or "Hello"
            items.append(
                f'<li><a href="/r/{board}/{slug(title)}">{_text(title)}</a> <span class="meta">by '
                f"{username(rng, self.names)} in {board} · {counted(rng.randint(1, 99), 'point')} · "
                f"{counted(rng.randint(0, 30), 'reply', 'replies')}</span></li>\n"
            )
        return "".join(items)

    def forum_board(self, board: str) -> Example:
        body = (
            f'<div class="board">\n<h1>r/{board}</h1>\n<ul class="threads">\n{self._thread_list([board], 6)}</ul>\n'
            "</div>"
        )
        return self._example("forum", "/r/{board}", f"/r/{board}", {"board": board}, body)

    def forum_front(self) -> Example:
        boards = sorted(self.fortunes)
        shown = self.rng.sample(boards, min(6, len(boards)))
        links = "".join(f'<li><a href="/r/{b}">{b}</a></li>' for b in shown)
        body = (
            f'<div class="front">\n<h1>{_text(self.sites["forum"].title)}</h1>\n<ul class="threads">\n'
            f'{self._thread_list(boards, 5)}</ul>\n<h2>Boards</h2>\n<ul class="boards">{links}</ul>\n</div>'
        )
        return self._example("forum", "/", "/", {}, body)

    # -- os -----------------------------------------------------------------------------------------------------

    def _window(self, title: str, inner: str) -> str:
        bar = f'<div class="titlebar">{_text(title)}</div>'
        return f'<div class="window">\n{bar}\n<div class="body">\n{inner}\n</div>\n</div>'

    def os_desktop(self) -> Example:
        rng = self.rng
        # No icons on the page: genui draws the site's own (site.toml's navigation) below what the model writes. The
        # two random draws that once chose seven icons' order and count stay, so the rest of the corpus is unchanged.
        rng.shuffle([None] * 7)
        rng.randint(4, 7)
        note = rng.choice(self.fortunes[rng.choice(sorted(self.fortunes))])
        body = f'<div class="desktop">\n{self._window("Note", f"<p>{_text(note)}</p>")}\n</div>'
        return self._example("os", "/", "/", {}, body, items=[fortune_item(note)])

    def os_files(self, directory: str, tree: dict[str, set[str]] | None = None, shared: bool = False) -> Example:
        tree = self.tree if tree is None else tree
        children = sorted(tree.get(directory, set()))[:18]
        items = []
        for name in children:
            full = f"{directory.rstrip('/')}/{name}"
            href, text = _attribute(full), _text(name)
            if full in tree:
                items.append(f'<li class="dir"><a href="/files{href}">{text}/</a></li>')
            else:
                items.append(f'<li class="file"><a href="/view{href}">{text}</a></li>')
        up = _attribute(directory.rsplit("/", 1)[0] or "/")
        here = _text(directory)
        inner = (
            f'<p class="path"><a href="/files{up if up != "/" else ""}">..</a> {here}</p>\n'
            '<ul class="files">' + "\n".join(items) + "</ul>"
        )
        body = self._window(f"Files — {directory}", inner)
        path = directory.lstrip("/")
        return self._example(
            "os",
            "/files/{path:path}",
            f"/files/{path}",
            {"path": path},
            body,
            shared=shared,
            items=[folder_item(directory)],
        )

    def os_viewer(self, pkg: Package) -> Example:
        path = f"usr/share/doc/{pkg.name}/README"
        paras = [f"<p>{_text(p.replace(chr(10), ' '))}</p>\n" for p in pkg.description.split("\n\n") if p.strip()]
        inner = self._fit(f"<h2>{_text(pkg.name)}: {_text(pkg.summary)}</h2>\n", paras, "")
        body = self._window(f"Viewer — /{path}", inner)
        return self._example(
            "os", "/view/{path:path}", f"/view/{path}", {"path": path}, body, items=[package_item(pkg)]
        )

    def os_text(self, path: str, text: str, shared: bool = False, items: Sequence[str] = ()) -> Example:
        """A text file in the viewer, whole lines while they fit."""
        lines = [_text(line) + "\n" for line in text.strip().split("\n")]
        inner = self._fit('<pre class="text">', lines, "</pre>")
        body = self._window(f"Viewer — {path}", inner)
        here = path.lstrip("/")
        return self._example(
            "os", "/view/{path:path}", f"/view/{here}", {"path": here}, body, shared=shared, items=items
        )

    def _shell(self, cmd: str, out: str, shared: bool = False, items: Sequence[str] = ()) -> Example:
        inner = f'<pre class="terminal">$ {_text(cmd)}\n{_text(out)}\n$ </pre>'
        body = self._window("Terminal", inner)
        path = f"/terminal?cmd={quote(cmd)}"
        return self._example("os", "/terminal", path, {}, body, query={"cmd": cmd}, shared=shared, items=items)

    def os_terminal(self) -> Example:
        rng = self.rng
        kind = rng.random()
        if kind < 0.5:
            pkg = rng.choice(self.packages)
            cmd = f"apt show {pkg.name}"
            desc = "\n ".join(pkg.description.split("\n"))[:700]
            out = (
                f"Package: {pkg.name}\nVersion: {pkg.version}\nSection: {pkg.section}\n"
                f"Description: {pkg.summary}\n {desc}"
            )
            item = package_item(pkg)
        elif kind < 0.8:
            directory = rng.choice([d for d in self.tree if len(self.tree[d]) > 2])
            cmd = f"ls {directory}"
            out = "\n".join(sorted(self.tree[directory])[:30])
            item = folder_item(directory)
        else:
            cmd = "fortune"
            out = rng.choice(self.fortunes[rng.choice(sorted(self.fortunes))])
            item = fortune_item(out)
        return self._shell(cmd, out, items=[item])

    SETTINGS = {
        "display": [
            ("Resolution", ["1920 × 1080", "1280 × 800", "2560 × 1440"]),
            ("Scale", ["100%", "125%", "200%"]),
            ("Night light", ["On", "Off"]),
            ("Refresh rate", ["60 Hz", "75 Hz", "144 Hz"]),
        ],
        "network": [
            ("Wi-Fi", ["Connected", "Off"]),
            ("Network", ["home", "office", "cafe"]),
            ("IP address", ["192.168.1.23", "10.0.0.7"]),
            ("Proxy", ["None", "Automatic"]),
        ],
        "sound": [
            ("Output", ["Speakers", "Headphones"]),
            ("Volume", ["40%", "75%", "100%"]),
            ("Input", ["Internal microphone", "Headset"]),
            ("Alert sound", ["Bark", "Drip", "Glass"]),
        ],
        "keyboard": [
            ("Layout", ["English (US)", "German", "French"]),
            ("Repeat delay", ["Short", "Long"]),
            ("Caps Lock", ["Caps Lock", "Ctrl"]),
        ],
        "users": [
            ("Name", ["user", "guest", "admin"]),
            ("Account type", ["Standard", "Administrator"]),
            ("Automatic login", ["On", "Off"]),
        ],
        "about": [
            ("Operating system", ["GenOS 1.0"]),
            ("Memory", ["4 GiB", "8 GiB", "16 GiB"]),
            ("Processor", ["2 cores", "4 cores"]),
            ("Disk", ["64 GB", "256 GB"]),
        ],
        "appearance": [
            ("Style", ["Light", "Dark"]),
            ("Accent colour", ["Blue", "Green", "Orange"]),
            ("Icon size", ["Small", "Large"]),
        ],
    }

    def os_settings(self, panel: str) -> Example:
        rng = self.rng
        rows = "".join(f"<dt>{k}</dt><dd>{rng.choice(v)}</dd>" for k, v in self.SETTINGS[panel])
        others = "".join(f'<li><a href="/settings/{p}">{p.title()}</a></li>' for p in self.SETTINGS if p != panel)
        inner = f'<ul class="panels">{others}</ul>\n<dl class="settings">{rows}</dl>'
        body = self._window(f"Settings — {panel.title()}", inner)
        return self._example("os", "/settings/{panel}", f"/settings/{panel}", {"panel": panel}, body)

    def os_browser(self, entry: Entry) -> Example:
        url = f"genpedia.org/wiki/{slug(entry.title)}"
        paras = [f"<p>{self._plain(p)}</p>\n" for p in entry.paragraphs]
        inner = self._fit(f'<p class="address">{_text(url)}</p>\n<h1>{_text(entry.title)}</h1>\n', paras, "")
        body = self._window(f"Browser — {entry.title}", inner)
        path = f"/browser?url={quote(url)}"
        return self._example("os", "/browser", path, {}, body, query={"url": url}, items=[entry_item(entry)])

    @functools.cached_property
    def _entries_by_title(self) -> list[Entry]:
        return sorted(self.entries.values(), key=lambda e: e.title)

    def home_files(self, rng: random.Random, user: str) -> dict[str, tuple[str, list[str]]]:
        """What a user's home folder holds, path -> (text, the items it is made from); "" for a file the viewer does
        not show: notes and ideas (fortunes), a to-do list (packages to try), a reading list (dictionary titles),
        documents (dictionary entries), downloaded packages, music and pictures. Seven things each there or not:
        HOME_USER's folder, written many times over, takes many forms (with four it had 8, and the model learnt none
        of them)."""
        home = f"/home/{user}"
        files: dict[str, tuple[str, list[str]]] = {}
        if user == HOME_USER or rng.random() < 0.7:
            pool = self.fortunes[rng.choice(sorted(self.fortunes))]
            notes = rng.sample(pool, min(len(pool), rng.randint(1, 3)))
            files[f"{home}/notes.txt"] = ("\n\n".join(notes), [fortune_item(t) for t in notes])
        if rng.random() < 0.5:
            todo = rng.sample(self.packages, min(len(self.packages), rng.randint(2, 6)))
            verbs = ("try", "install", "read about", "look at", "remove")
            text = "\n".join(f"- {rng.choice(verbs)} {p.name}: {p.summary}" for p in todo)
            files[f"{home}/todo.txt"] = (text, [package_item(p) for p in todo])
        if rng.random() < 0.7:
            entries = self._entries_by_title
            for entry in rng.sample(entries, min(len(entries), rng.randint(2, 6))):
                name = re.sub(r"[^A-Za-z0-9.+-]+", "_", entry.title).strip("_.") or "untitled"
                text = "\n\n".join(re.sub(r"\{([^{}]+)\}", r"\1", p) for p in entry.paragraphs)
                files[f"{home}/Documents/{name}.txt"] = (f"{entry.title}\n\n{text}", [entry_item(entry)])
        if rng.random() < 0.5:
            for pkg in rng.sample(self.packages, min(len(self.packages), rng.randint(1, 4))):
                version = re.sub(r"[^A-Za-z0-9.+~-]", "", pkg.version.rpartition(":")[2])
                files[f"{home}/Downloads/{pkg.name}_{version}_amd64.deb"] = ("", [])
        if rng.random() < 0.4:
            pool = self.fortunes[rng.choice(sorted(self.fortunes))]
            ideas = rng.sample(pool, min(len(pool), rng.randint(1, 2)))
            files[f"{home}/ideas.txt"] = ("\n\n".join(ideas), [fortune_item(t) for t in ideas])
        if rng.random() < 0.4:
            entries = self._entries_by_title
            chosen = rng.sample(entries, min(len(entries), rng.randint(3, 8)))
            files[f"{home}/reading.txt"] = ("\n".join(f"- {entry.title}" for entry in chosen), [])  # titles only
        for folder, ext in (("Music", "ogg"), ("Pictures", "png")):
            if rng.random() < 0.3:
                for word in rng.sample(self.names, min(len(self.names), rng.randint(1, 4))):
                    files[f"{home}/{folder}/{word}.{ext}"] = ("", [])
        return files or self.home_files(rng, user)  # an empty folder teaches nothing: draw again

    def os_home(self, rng: random.Random, user: str) -> Iterator[Example]:
        """One user's home folder: its listings, its text files in the viewer, ``ls`` of it in the terminal (a bare
        ``ls`` too for HOME_USER, whose pages are shared: the desktop's icons open them, sites/os/site.toml)."""
        files = self.home_files(rng, user)
        tree: dict[str, set[str]] = {}
        for path in files:
            parent, _, name = path.rpartition("/")
            while parent != "/home":
                tree.setdefault(parent, set()).add(name)
                parent, _, name = parent.rpartition("/")
        shared = user == HOME_USER
        for directory in sorted(tree):
            yield self.os_files(directory, tree, shared=shared)
        for path, (text, items) in files.items():
            if text:
                yield self.os_text(path, text, shared=shared, items=items)
        listing = "\n".join(sorted(tree[f"/home/{user}"]))
        folder = [folder_item(f"/home/{user}")]
        yield self._shell(f"ls /home/{user}", listing, shared=shared, items=folder)
        if shared:
            yield self._shell("ls", listing, shared=True, items=folder)

    def os_homes(self, users: int = 300, own: int = 150) -> Iterator[Example]:
        """``users`` home folders of users named by dictionary words, and ``own`` of HOME_USER's, with an RNG of their
        own so the pages built before them stay as they were."""
        rng = random.Random(f"{self.seed}-home")
        names = sorted({n for n in self.names if n != HOME_USER})
        everyone = [*rng.sample(names, min(users, len(names))), *[HOME_USER] * own]
        for user in everyone:
            yield from self.os_home(rng, user)
        yield self.os_files("/home", {"/home": set(everyone), **{f"/home/{u}": set() for u in everyone}})

    # -- all ----------------------------------------------------------------------------------------------------

    def build(self) -> Iterator[Example]:
        rng = self.rng
        entries = list(self.entries.values())
        for entry in entries:
            yield self.wiki_article(entry)
        for word in rng.sample(self.names, 2500):
            found = self.wiki_search(word)
            if found:
                yield found
        for _ in range(300):
            yield self.wiki_home()
        boards = sorted(self.fortunes)
        for _ in range(16000):
            yield self.forum_thread(rng.choice(boards))
        for _ in range(1500):
            yield self.forum_board(rng.choice(boards))
        for _ in range(300):
            yield self.forum_front()
        for _ in range(300):
            yield self.os_desktop()
        for directory in sorted(d for d in self.tree if self.tree[d]):
            yield self.os_files(directory)
        for pkg in self.packages[:6000]:
            yield self.os_viewer(pkg)
        for _ in range(4000):
            yield self.os_terminal()
        for _ in range(700):
            yield self.os_settings(rng.choice(sorted(self.SETTINGS)))
        for entry in rng.sample(entries, 2500):
            yield self.os_browser(entry)
        yield from self.os_homes()


def distinct(examples: Iterable[Example]) -> Iterator[Example]:
    """The first page of each URL, and every distinct page of a shared one (Example.shared)."""
    seen: set[tuple[str, str, str]] = set()
    for ex in examples:
        key = (ex.site, ex.path, ex.html if ex.shared else "")
        if key not in seen:
            seen.add(key)
            yield ex


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="genui corpus", description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--out", type=Path, default=Path("data/corpus.jsonl"), help="JSONL file to write")
    parser.add_argument("--sites-dir", type=Path, default=bundled("sites"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tokenizer", type=Path, default=Path("data/tokenizer"), help="where to save the new BPE")
    parser.add_argument("--vocab", type=int, default=4096, help="BPE vocabulary size (default: %(default)s)")
    parser.add_argument("--packed", type=Path, default=Path("data/packed.npz"), help="packed token ids for training")
    parser.add_argument("--max-prompt", type=int, default=96, help="longest prompt kept, in tokens")
    parser.add_argument("--max-response", type=int, default=512, help="longest page kept, in tokens (2 canvases)")
    parser.add_argument("--text-only", action="store_true", help="write the JSONL only: no tokenizer, no packing")
    parser.add_argument(
        "--split",
        choices=sorted(SPLITS),
        default="url",
        help="hold pages out by their URL (default: the shipped adapter's split, so `genui quality` on this corpus "
        "measures it on pages it never trained on) or by the source item they are made from (no held-out entry, "
        "fortune or package in any training page: the split for a new adapter trained from the bare base; "
        "docs/model.md, session 54)",
    )
    args = parser.parse_args(argv)
    sites = {s.name: s for s in load_sites(args.sites_dir) if s.name in ("wiki", "forum", "os")}
    builder = Builder(sites, seed=args.seed, split=SPLITS[args.split])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    counts: dict[tuple[str, bool], int] = {}
    # written beside it and moved into place whole: a killed build leaves no cut corpus that the packer (which skips
    # a half-written last row, for genui distill's sake) would take for a whole one
    partial = args.out.with_name(args.out.name + ".partial")
    with partial.open("w", encoding="utf-8") as f:
        for ex in distinct(builder.build()):
            f.write(
                json.dumps(
                    {"site": ex.site, "path": ex.path, "prompt": ex.prompt, "html": ex.html, "holdout": ex.holdout},
                    ensure_ascii=False,
                )
                + "\n"
            )
            counts[(ex.site, ex.holdout)] = counts.get((ex.site, ex.holdout), 0) + 1
    partial.replace(args.out)
    for (site, held), n in sorted(counts.items()):
        print(f"{site:6} {'holdout' if held else 'train':8} {n:7d}", file=sys.stderr)
    if not args.text_only:
        pack(args.out, args.tokenizer, args.vocab, args.packed, args.max_prompt, args.max_response)
    return 0


def pack(corpus: Path, tokenizer_dir: Path, vocab: int, packed_path: Path, max_prompt: int, max_response: int) -> None:
    """Train the byte-level BPE on the corpus and write the packed token ids that training reads."""
    from lab.data import pack_jsonl  # torch and transformers only for this step
    from lab.tokenizer import train_tokenizer

    def texts() -> Iterator[str]:
        with corpus.open(encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                yield row["prompt"]
                yield row["html"]

    tokenizer = train_tokenizer(texts(), vocab_size=vocab)
    tokenizer.save_pretrained(tokenizer_dir)
    packed = pack_jsonl(corpus, tokenizer, max_prompt=max_prompt, max_response=max_response)
    packed.save(packed_path)
    print(f"{len(packed)} pages packed ({len(packed.responses)} response tokens) into {packed_path}", file=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
