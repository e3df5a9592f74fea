"""The page cache with its history of versions, and user posts: one SQLite file in WAL mode.

Every write is one transaction, so a crash leaves either the whole page (or post) or nothing. Calls are short and
synchronous on purpose: the app checks the cache and joins or starts a generation without yielding to the event loop
in between, so two clients asking at once can never both start the same generation.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sqlite3
import stat
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from genui.words import WORDS

MAX_USER = 32  # characters of a user name
MAX_POST = 2000  # characters of one post
POST_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # in a post: a C0 or C1 control, but a tab or a line break
SAME_POST_S = 60.0  # seconds within which the same post to the same thread is the same form sent twice
# A reader's name: letters, their marks and digits of any script (太郎, محمد, Zoë), - and _; no spaces, punctuation or
# invisible characters (a right-to-left override would turn the names after it around). ASCII letters alone refused
# every reader of a Japanese or Arabic site (a walkthrough of sites in other languages).
USER_RULE = WORDS["user_rule"].format(n=MAX_USER)
# the same, for the form's field (an HTML pattern is a v-mode JS regex), with the joiners (valid_user says where)
USER_PATTERN = r"[\p{L}\p{M}\p{N}_\-\u200C\u200D\u00B7\u30FB]+"
ZWNJ, ZWJ = "\u200c", "\u200d"
MIDDLE_DOT, KATAKANA_MIDDLE_DOT = "\u00b7", "\u30fb"  # Catalan's col·lega; a Japanese name's ジョン・スミス
# The Arabic script's letters (its blocks: Arabic, its Supplement and Extended-A) that join on both sides, as
# Unicode's ArabicShaping.txt types them: all but the right-joining ones (alef, dal, reh, waw and their kin, which
# never join the letter after them) and the non-joining hamza. A zero-width non-joiner shows only after a letter that
# would have joined the next one, and before one that joins (Persian's علی‌رضا, IDNA's CONTEXTJ).
_ARABIC_LETTERS = ((0x0620, 0x06FF), (0x0750, 0x077F), (0x08A0, 0x08FF))
_RIGHT_JOINING = frozenset(
    [0x0622, 0x0623, 0x0624, 0x0625, 0x0627, 0x0629, 0x062F, 0x0630, 0x0631, 0x0632, 0x0648, 0x0671, 0x0672]
    + [0x0673, 0x0675, 0x0676, 0x0677, *range(0x0688, 0x069A), 0x06C0, *range(0x06C3, 0x06CC), 0x06CD, 0x06CF]
    + [0x06D2, 0x06D3, 0x06D5, 0x06EE, 0x06EF, 0x0759, 0x075A, 0x075B, 0x076B, 0x076C, 0x0771, 0x0773, 0x0774]
    + [0x0778, 0x0779, 0x08AA, 0x08AB, 0x08AC, 0x08AE, 0x08B1, 0x08B2, 0x08B9]
)
_NON_JOINING = frozenset([0x0621, 0x0674, 0x06E5, 0x06E6, 0x08AD, 0x08C9])


# Letters and marks that show nothing (Unicode's Default_Ignorable_Code_Point outside the format characters, which
# no name takes anyway): a Hangul filler is a name no one sees, a variation selector after "ada" another reader's
# name that reads as hers (a review of this change).
_IGNORABLE = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xE0100, 0xE01EF),
)
MARKS_IN_A_ROW = 4  # marks on one letter: Indic and Vietnamese letters carry up to 3; more is stacked noise


def valid_user(user: str) -> bool:
    """Whether ``user`` (NFC) is a reader's name by USER_RULE."""
    if not 1 <= len(user) <= MAX_USER or unicodedata.category(user[0])[0] == "M":  # a mark goes on a letter
        return False
    marks = 0
    for at, c in enumerate(user):
        kind = unicodedata.category(c)[0]
        if c in (ZWNJ, ZWJ):
            if not _joiner_shows(user, at):
                return False
            continue
        if c in (MIDDLE_DOT, KATAKANA_MIDDLE_DOT):  # between two letters (IDNA's CONTEXTO): l·l, and ・ in Japanese
            before, after = user[at - 1 : at], user[at + 1 : at + 2]
            between = before.isalpha() and after.isalpha()
            if not between or (c == MIDDLE_DOT and (before + after).lower() != "ll"):
                return False
            if c == KATAKANA_MIDDLE_DOT and not any(_japanese(letter) for letter in user):  # col・lega reads col·lega
                return False
            continue
        if not (c in "_-" or kind in "LMN") or any(low <= ord(c) <= high for low, high in _IGNORABLE):
            return False
        marks = marks + 1 if kind == "M" else 0
        if marks > MARKS_IN_A_ROW:
            return False
    return True


def _folded(text: str) -> str:
    """``text`` as words are compared: composed (NFC), case-folded, each run of white space one space."""
    return " ".join(unicodedata.normalize("NFC", text).casefold().split())


def _joiner_shows(user: str, at: int) -> bool:
    """Whether the joiner at ``at`` changes how the name looks, where IDNA (RFC 5892's CONTEXTJ) takes one: either
    joiner after a virama and before a letter of the virama's own script (an Indic conjunct: क्‍ष), a non-joiner
    between an Arabic letter that joins the next and one that joins the last (Persian, Kurdish, Urdu). Elsewhere it
    shows nothing, and "a‌da" (or "ا‌بجد", whose alef joins nothing after it) would read as another reader's name."""
    before, after = user[at - 1 : at], user[at + 1 : at + 2]
    if not before or not after or unicodedata.category(after)[0] != "L":
        return False
    if unicodedata.combining(before) == 9:  # a virama: its script's block is the letter's (128 code points each)
        return ord(before) >> 7 == ord(after) >> 7
    if user[at] != ZWNJ:
        return False
    letter = at - 1
    while letter > 0 and unicodedata.category(user[letter]) == "Mn":  # its marks (a vowel sign) are seen through
        letter -= 1
    joins_next = _arabic(user[letter]) and ord(user[letter]) not in _RIGHT_JOINING | _NON_JOINING
    return joins_next and _arabic(after) and ord(after) not in _NON_JOINING


def _japanese(char: str) -> bool:
    """Hiragana, katakana (but its middle dot) or a Han ideograph."""
    code = ord(char)
    return (0x3040 <= code <= 0x30FF and code != 0x30FB) or 0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF


def _arabic(char: str) -> bool:
    return unicodedata.category(char)[0] == "L" and any(low <= ord(char) <= high for low, high in _ARABIC_LETTERS)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS pages (
    site TEXT NOT NULL,
    path TEXT NOT NULL,
    query TEXT NOT NULL,
    model TEXT NOT NULL,
    template TEXT NOT NULL,
    posts INTEGER NOT NULL,
    version INTEGER NOT NULL,
    seed INTEGER NOT NULL,
    title TEXT NOT NULL,
    html TEXT NOT NULL,
    seconds REAL NOT NULL,
    created REAL NOT NULL,
    answered INTEGER NOT NULL DEFAULT 0,
    replied INTEGER NOT NULL DEFAULT 0,
    mount TEXT,
    continues INTEGER NOT NULL DEFAULT 0,
    seen REAL,
    read_upto INTEGER,
    PRIMARY KEY (site, path, query, model, template, posts, version)
);
CREATE INDEX IF NOT EXISTS pages_by_url ON pages (site, path, query, created);
CREATE INDEX IF NOT EXISTS pages_by_template ON pages (site, model, template, created);
CREATE TABLE IF NOT EXISTS posts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    site TEXT NOT NULL,
    path TEXT NOT NULL,
    user TEXT NOT NULL,
    text TEXT NOT NULL,
    created REAL NOT NULL,
    sent TEXT
);
CREATE INDEX IF NOT EXISTS posts_by_thread ON posts (site, path, id);
CREATE TABLE IF NOT EXISTS served (
    site TEXT PRIMARY KEY,
    folder TEXT NOT NULL,
    at REAL NOT NULL
);
"""


# The columns every genui made its tables with (the pages' answered, replied and mount came later: Store adds them).
PAGE_COLUMNS = frozenset(
    {"site", "path", "query", "model", "template", "posts", "version", "seed", "title", "html", "seconds", "created"}
)
POST_COLUMNS = frozenset({"id", "site", "path", "user", "text", "created"})


class PageWithdrawn(Exception):
    """A finished page is not stored: what it was written from or after was deleted while it was being written."""


class ReadPostDeleted(PageWithdrawn):
    """A page was written from a prompt that held a reader's post deleted since (``genui posts delete``): it is not
    stored, so that no stored page keeps the post's text."""


class VersionTaken(PageWithdrawn):
    """A version a visitor chose (a kept variation, a rewrite) was stored first by another process with other text:
    it is not stored, and the visitor is told, rather than shown the other page as their own."""


class EarlierVersionsDeleted(PageWithdrawn):
    """A page's version was written while the versions before it were deleted (``genui cache forget``, or a post's
    deletion, which takes the versions that may show it): it is not stored, so that the versions run from 1."""


class PostRejected(ValueError):
    """A post breaks the rules (name, length); ``str(error)`` says which, in words fit for the user, and ``field``
    names the form's field it is about (``user`` or ``text``)."""

    def __init__(self, reason: str, field: str = "") -> None:
        super().__init__(reason)
        self.field = field


@dataclass(frozen=True, slots=True)
class PageKey:
    """Everything a cached page depends on. A change to any field is a different page."""

    site: str
    path: str  # canonical site-relative path
    query: str  # canonical query string ("" when none)
    model: str  # the engine's model id
    template: str  # the prompt template's version (a hash of its source)
    posts: int = 0  # id of the newest user post the page was written with; 0 when none


@dataclass(frozen=True, slots=True)
class PageGroup:
    """The cached pages of one site written by one model from one version of their route (genui cache)."""

    site: str
    model: str
    template: str
    posts: int  # PageKey.posts: not 0 only in caches from before replies were written in place
    urls: int  # pages (URLs)
    versions: int  # all their versions
    size: int  # bytes of their HTML as stored (an earlier version of a thread: what follows the one before it)


@dataclass(frozen=True, slots=True)
class StoredPage:
    key: PageKey
    version: int  # 1, 2, ... per key; each "regenerate" adds one
    seed: int
    title: str  # text of the page's first <h1>, "" when it has none
    html: str  # final, sanitised, links rewritten
    seconds: float  # generation time
    created: float  # unix time
    answered: int = 0  # id of the newest reader post shown inside ``html`` (a thread's replies in place); 0 when none
    replied: int = 0  # id of the newest reader post it was written after (in its prompt or answered in place)
    mount: str | None = None  # the mount its links were written for ("" or "/name"); None: from before it was kept


@dataclass(frozen=True, slots=True)
class ListedPage:
    """A URL with a page in the cache, as genui cache pages lists it."""

    path: str
    query: str
    title: str  # of its newest version, "" when it has no <h1>
    newest: int  # that version's number
    versions: int  # how many it has
    created: float  # when the newest was written
    seen: float | None  # when any was last shown (None: never; written ahead, or by an earlier genui)


@dataclass(frozen=True, slots=True)
class WrittenPage:
    """A URL with a page in the cache."""

    path: str
    query: str
    title: str  # of its newest page, "" when it has no <h1>


@dataclass(frozen=True, slots=True)
class StoredPost:
    id: int
    user: str
    text: str
    created: float


@dataclass(frozen=True, slots=True)
class PlacedPost:
    """A post with the thread it was made on (genui posts)."""

    site: str
    path: str
    post: StoredPost


@dataclass(frozen=True, slots=True)
class DeletedPost:
    """What deleting a post took with it (or would take, dry run): the thread's versions that read it or show it,
    and how many of the thread's later posts those versions showed, whose replies went with them."""

    placed: PlacedPost
    versions: int
    later: int = 0


def _shows(character: str) -> bool:
    """Whether ``character`` shows anything: not a space, a format or control character (a zero-width space, a
    right-to-left override), an ignorable letter (a Hangul filler) or a blank Braille pattern."""
    if character.isspace() or character == "\u2800" or unicodedata.category(character) in ("Cc", "Cf"):
        return False
    return not any(low <= ord(character) <= high for low, high in _IGNORABLE)


def check_post(user: str, text: str) -> tuple[str, str]:
    """The post as it will be stored (line breaks as `\n`, without the blank lines before it or the spaces after it:
    the first line's indentation stays where more lines follow, as a pasted program has it), or PostRejected. A
    browser sends a textarea's line breaks as `\r\n` and counts them as one character for its maxlength, as this
    does."""
    user = unicodedata.normalize("NFC", user)  # Zoë typed with a combining diaeresis is the Zoë typed without
    if not valid_user(user):
        raise PostRejected(USER_RULE, "user")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").rstrip().split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    text = "\n".join(lines) if len(lines) > 1 else "".join(lines).strip()  # one line: its spaces are no indent
    if not any(_shows(character) for character in text):  # blanks, or zero-width spaces only: a box with nothing
        raise PostRejected("the post is empty", "text")
    if POST_CONTROL.search(text):  # a bell, a terminal's escape or a NUL, stored and sent on to the model as it was
        raise PostRejected("the post holds a control character (a terminal's escape, a NUL); remove it", "text")
    if len(text) > MAX_POST:
        raise PostRejected(f"the post is longer than {MAX_POST} characters", "text")
    return user, text


def _wal(db: sqlite3.Connection, within: float) -> None:
    """Switch ``db`` to WAL, trying again while another process holds the file: the switch answers "locked" at once,
    without the busy timeout (two processes opening a new file together)."""
    deadline = time.monotonic() + within
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


class SiteRenameRefused(Exception):
    """Store.rename_site would splice two sites' histories together, or has nothing to move; ``fix`` says what to
    do."""

    def __init__(self, reason: str, fix: str) -> None:
        super().__init__(f"{reason}: {fix}")
        self.fix = fix


class NotAPageCache(Exception):
    """A database file that is not genui's page cache (another program's, or a newer genui's), which genui leaves
    untouched."""


# The page cache's layout, stamped in SQLite's user_version: a genui that finds a higher one (a newer genui's file,
# whose pages it could mistake for an earlier config's and prune) refuses the file. 0: a file from before the stamp.
# 2: an earlier version may be stored as what follows the version before it (``continues``), which layout 1 would
# read as a whole page.
SCHEMA_VERSION = 2


def check_page_cache(path: Path, *, earlier: bool = False) -> None:
    """Raise NotAPageCache unless the file at ``path`` is a page cache genui made (or an empty database), read only:
    nothing about it is changed. ``earlier``: one an earlier genui made may lack its posts table (Store adds it).
    sqlite3.OperationalError when it cannot be read (locked, a read-only folder)."""
    try:
        with contextlib.closing(sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)) as check:
            tables = {name for (name,) in check.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            columns = {
                table: {row[1] for row in check.execute(f"PRAGMA table_info({table})")}
                for table in ("pages", "posts")
                if table in tables
            }
            post_id = [row for row in check.execute("PRAGMA table_info(posts)") if row[1] == "id"]
            (schema,) = check.execute("PRAGMA user_version").fetchone()
    except sqlite3.OperationalError:
        raise
    except sqlite3.DatabaseError as err:
        if "malformed" in str(err):  # a page cache damaged (a disk that filled, a copy taken mid-write)
            raise NotAPageCache(
                f"{path} is damaged ({err}): restore a backup, or recover what it holds with sqlite3's .recover into"
                " a new file"
            ) from None
        raise NotAPageCache(f"{path} is not a page cache: {err}") from None
    if not tables:
        return  # an empty database: genui makes its tables in it
    if schema > SCHEMA_VERSION and "pages" in tables:  # another program's file has its own user_version
        raise NotAPageCache(
            f"{path} is a page cache of a newer genui (layout {schema}; this genui knows {SCHEMA_VERSION}): serve it"
            " with that genui, or give this one another --db"
        )
    needed = {"pages"} if earlier else {"pages", "posts"}
    if not needed <= tables:
        missing = sorted(needed - tables)
        raise NotAPageCache(
            f"{path} is not a page cache: it has no {' and '.join(missing)} table{'s' * (len(missing) > 1)}"
        )
    if not (
        columns["pages"] >= PAGE_COLUMNS
        and ("posts" not in columns or columns["posts"] >= POST_COLUMNS)
        and ("posts" not in columns or [(row[2].upper(), row[5]) for row in post_id] == [("INTEGER", 1)])
    ):
        raise NotAPageCache(f"{path} is not a page cache: its pages and posts tables are another program's")


JOURNAL_LIMIT = 64 * 1024 * 1024  # bytes the WAL file keeps after a checkpoint
BUSY_TIMEOUT_S = 1.0  # how long a write waits for another process's (genui cache prune, a second server) to end


T = TypeVar("T")
FREE_POLL_S = 0.1  # how often a write waiting for another process's tries again (when_free)


def is_busy(error: sqlite3.Error) -> bool:
    """Whether ``error`` says another connection holds the database (SQLITE_BUSY, SQLITE_LOCKED and their extended
    codes), not that the disk is full or failed."""
    return getattr(error, "sqlite_errorname", "").startswith(("SQLITE_BUSY", "SQLITE_LOCKED"))


def _renumbered(mark: int, renumbered: dict[int, int]) -> int:
    """A version's ``answered`` or ``replied`` (the newest post id it showed or read) by the posts' new ids: the new
    id of the newest post it covered; 0 for one that covered none."""
    covered = [old for old in renumbered if old <= mark]
    return renumbered[max(covered)] if covered else 0


def cannot_store(error: sqlite3.Error) -> bool:
    """Whether ``error`` says the database file cannot be written at all: its disk full (SQLITE_FULL), failing
    (SQLITE_IOERR) or the file read-only (SQLITE_READONLY), and their extended codes."""
    return getattr(error, "sqlite_errorname", "").startswith(("SQLITE_FULL", "SQLITE_IOERR", "SQLITE_READONLY"))


def fix_for(error: sqlite3.Error, path: Path | str | None = None) -> str:
    """What to do about an error SQLite gave on opening or writing the page cache (at ``path``, where known), as a
    command says it."""
    said, name = str(error), getattr(error, "sqlite_errorname", "") or ""
    if is_busy(error) or "locked" in said:
        return "try again, or stop what holds it"
    if name.startswith("SQLITE_READONLY") or "readonly" in said or "read-only" in said:
        unwritable = _unwritable(Path(path)) if path is not None and str(path) != ":memory:" else []
        if unwritable:  # a -shm left read-only by a run on a read-only file stays so once the file is writable again
            return f"make {' and '.join(unwritable)} writable (chmod u+w), or run as the owner"
        return "genui writes beside it (SQLite's -wal and -shm files): make its folder writable, or run as its owner"
    if name.startswith(("SQLITE_FULL", "SQLITE_IOERR")) or "disk I/O error" in said or "full" in said:
        return "its disk may be full: free some space (df shows it), or name a --db on another disk"
    if "malformed" in said:
        return "it is damaged: restore a backup, or recover what it holds with sqlite3's .recover into a new file"
    return "check that it is a page cache genui can read and write"


def _cannot_store(error: sqlite3.OperationalError) -> bool:
    """Whether ``error`` says the page cache cannot store anything now: its disk full, an I/O error, read-only."""
    said, name = str(error), getattr(error, "sqlite_errorname", "") or ""
    return name.startswith(("SQLITE_FULL", "SQLITE_IOERR", "SQLITE_READONLY")) or any(
        words in said for words in ("full", "disk I/O error", "readonly", "read-only")
    )


def _unwritable(path: Path) -> list[str]:
    """The page cache's files, and its folder, that this process may not write: each with its mode."""
    found = []
    for each in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if each.exists() and not os.access(each, os.W_OK):
            found.append(f"{each} (mode {stat.S_IMODE(each.stat().st_mode):o})")
    if path.parent.exists() and not os.access(path.parent, os.W_OK | os.X_OK):
        found.append(f"its folder {path.parent}")
    return found


async def when_free(write: Callable[[], T], within: float = BUSY_TIMEOUT_S, poll: float = FREE_POLL_S) -> T:
    """``write()``, a write made with ``wait=False``, tried again every ``poll`` seconds while another process holds
    the page cache, for up to ``within`` seconds: the server answers others meanwhile, where SQLite's busy timeout
    would hold its event loop up. The last "locked" error is raised (a 503 with Retry-After: genui.errors)."""
    until = time.monotonic() + within
    while True:
        try:
            return write()
        except sqlite3.OperationalError as err:
            if not is_busy(err) or time.monotonic() >= until:
                raise
        await asyncio.sleep(poll)


class FileGone(sqlite3.OperationalError):
    """The database file was deleted or replaced while this Store had it open: a write would go to the old file,
    which nothing opens again (a restart makes a new, empty one there, or opens the file put in its place)."""

    sqlite_errorname = "SQLITE_IOERR_GONE"  # cannot_store: a 503 that says nothing is stored, and is logged


def private_file(path: Path) -> None:
    """Make ``path`` an empty file that only its owner may read and write (0600), unless there is a file there: it
    holds readers' posts, their names and what they wrote, which the umask's 0644 let every local account read (a
    moderator's review). SQLite gives its -wal and -shm files the database's own mode. A file that exists keeps the
    mode its owner gave it."""
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


class Store:
    """One SQLite database. Safe to share between threads; keep one per process. Another program's database is
    refused (NotAPageCache) before anything in it is changed. A write to a file deleted or replaced since it was
    opened is refused (FileGone)."""

    def __init__(self, path: Path | str, busy_timeout: float = BUSY_TIMEOUT_S) -> None:
        self.path = Path(path)
        self.new = str(path) != ":memory:" and not (self.path.is_file() and self.path.stat().st_size)  # made here
        # why the last write failed, where the file cannot store anything now (a full disk, an I/O error, read-only),
        # until a write succeeds; and how many writes failed so (the server's health and metrics say both)
        self.failing: str | None = None
        self.write_failures = 0
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            if Path(path).is_file() and Path(path).stat().st_size:
                check_page_cache(Path(path), earlier=True)
            private_file(Path(path))
        # Autocommit mode: transactions are explicit (see _transaction), never opened behind our back.
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=busy_timeout)
        self._busy_ms = round(busy_timeout * 1000)
        self._lock = threading.Lock()
        _wal(self._db, busy_timeout)
        # WAL + FULL: a commit is on disk when it returns, so a post a reader was told is saved survives a crash of
        # the machine too (NORMAL only survives the process's; it leaves the WAL unsynced until a checkpoint)
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA fullfsync=ON")  # macOS: an fsync that reaches the disk (elsewhere it does nothing)
        self._db.execute("PRAGMA checkpoint_fullfsync=ON")
        # A big write (a migration of every row, an earlier cache adopted) leaves the WAL file as large as the
        # database for as long as the server runs, unless it is cut back after each checkpoint.
        self._db.execute(f"PRAGMA journal_size_limit={JOURNAL_LIMIT}")
        # What is deleted is overwritten, not left in the file's free pages (SQLite's default, though some builds
        # turn it on): a reader's post deleted on request was still in the file, and in every backup of it after
        self._db.execute("PRAGMA secure_delete=ON")
        self._db.executescript(_SCHEMA)
        self._at = self.path.resolve()  # the file opened, whatever folder the process is in later
        self._file = self._identity()
        self._migrate()

    def _identity(self) -> tuple[int, int] | None:
        """The file's device and inode (None in memory, or once it is gone)."""
        if str(self.path) == ":memory:":
            return None
        try:
            found = os.stat(self._at)
        except FileNotFoundError:
            return None
        return found.st_dev, found.st_ino

    def gone(self) -> str | None:
        """Why the file this Store opened is no longer at its path (deleted, or another put there); None while it
        is."""
        if self._file is None or self._identity() == self._file:
            return None
        now = "deleted" if self._identity() is None else "replaced by another file"
        return (
            f"{self.path} was {now} while genui had it open, so nothing genui stores now would be kept: restart"
            " genui (to put a backup in place, stop genui first and delete the file's -wal and -shm)"
        )

    def _migrate(self) -> None:
        """Bring a database made by an earlier genui up to this schema, in one transaction (two processes opening
        it at once do it once)."""
        with self._transaction() as db:
            columns = {row[1] for row in db.execute("PRAGMA table_info(pages)")}
            if "answered" not in columns:  # from before replies in place
                db.execute("ALTER TABLE pages ADD COLUMN answered INTEGER NOT NULL DEFAULT 0")
            if "replied" not in columns:  # from before a thread's waiting posts were answered on a visit
                db.execute("ALTER TABLE pages ADD COLUMN replied INTEGER NOT NULL DEFAULT 0")
                # The best estimate: the posts made before a version was stored were in its prompt or answered.
                db.execute(
                    "UPDATE pages SET replied = MAX(answered, COALESCE((SELECT MAX(id) FROM posts WHERE posts.site ="
                    " pages.site AND posts.path = pages.path AND posts.created <= pages.created), 0))"
                )
            if "mount" not in columns:  # from before the mount a page's links were written for was kept
                db.execute("ALTER TABLE pages ADD COLUMN mount TEXT")
            if "continues" not in columns:  # from before a version was stored as what follows the one before it
                db.execute("ALTER TABLE pages ADD COLUMN continues INTEGER NOT NULL DEFAULT 0")
            if "seen" not in columns:  # from before the pages shown were noted (genui cache prune --unseen)
                db.execute("ALTER TABLE pages ADD COLUMN seen REAL")
                # its pages count as shown now: none is taken for unread because nothing noted its readers before
                db.execute("UPDATE pages SET seen = ?", (time.time(),))
            if "read_upto" not in columns:  # from before the newest post a run read was kept: NULL, not known
                db.execute("ALTER TABLE pages ADD COLUMN read_upto INTEGER")
            if "sent" not in {row[1] for row in db.execute("PRAGMA table_info(posts)")}:  # before reply forms' tokens
                db.execute("ALTER TABLE posts ADD COLUMN sent TEXT")
            (schema,) = db.execute("PRAGMA user_version").fetchone()
            if schema > SCHEMA_VERSION:  # stamped since check_page_cache looked (a newer genui, at the same time)
                raise NotAPageCache(f"the page cache became a newer genui's (layout {schema}) as it was opened")
            # A new file is this layout's. An earlier genui's keeps its layout until a version is first stored as what
            # follows the one before it (_compact), which only this layout reads: opened to list posts or pages, it
            # stays one that genui can open again.
            (pages,) = db.execute("SELECT EXISTS (SELECT 1 FROM pages) OR EXISTS (SELECT 1 FROM posts)").fetchone()
            if schema < SCHEMA_VERSION and not pages:
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def copy_to(self, path: Path) -> Store:
        """A copy of the database at ``path``, whole as it is now (SQLite's backup, whatever another process writes
        meanwhile), to try out what a write would do."""
        with contextlib.closing(sqlite3.connect(path)) as copy, self._lock:
            self._db.backup(copy)
        return Store(path)

    def record_served(self, site: str, folder: Path) -> None:
        """Note that a server serves ``site`` from ``folder`` now: ``genui cache`` judges its pages by that folder's
        routes, not by another site of the same name's."""
        with self._transaction() as db:
            db.execute(
                "INSERT INTO served (site, folder, at) VALUES (?, ?, ?)"
                " ON CONFLICT (site) DO UPDATE SET folder = excluded.folder, at = excluded.at",
                (site, str(folder.resolve()), time.time()),
            )

    def served_from(self, site: str) -> Path | None:
        """The folder a server last served ``site`` from (None: none has since genui noted it)."""
        with self._lock:
            row = self._db.execute("SELECT folder FROM served WHERE site = ?", (site,)).fetchone()
        return None if row is None else Path(row[0])

    @contextmanager
    def _transaction(self, wait: bool = True) -> Iterator[sqlite3.Connection]:
        """One write transaction. ``wait=False``: a cache another process holds is a "locked" error at once, not
        after the busy timeout (a caller that tries again later, without holding up the event loop meanwhile)."""
        with self._lock:
            gone = self.gone()
            if gone is not None:
                raise FileGone(gone)
            if not wait:
                self._db.execute("PRAGMA busy_timeout = 0")
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                    self._db.execute("COMMIT")  # may fail too (busy, outside WAL): rolled back below
                    self.failing = None
                except BaseException as err:
                    if self._db.in_transaction:  # SQLite has rolled back by itself on a full disk or an I/O error
                        self._db.execute("ROLLBACK")
                    if isinstance(err, sqlite3.OperationalError) and _cannot_store(err):
                        self.failing, self.write_failures = str(err), self.write_failures + 1
                    raise
            finally:
                if not wait:
                    self._db.execute(f"PRAGMA busy_timeout = {self._busy_ms}")

    # -- pages -------------------------------------------------------------------------------------------------

    def page(self, key: PageKey, version: int | None = None) -> StoredPage | None:
        """Version ``version`` of the page, or its newest version when None."""
        sql = f"SELECT {_PAGE_COLUMNS}, continues FROM pages WHERE " + _KEY_WHERE
        args: tuple[object, ...] = _key_args(key)
        if version is None:
            sql += " ORDER BY version DESC LIMIT 1"
        else:
            sql += " AND version = ?"
            args += (version,)
        with self._lock:
            self._db.execute("BEGIN")  # one snapshot for the row and the versions it continues
            try:
                row = self._db.execute(sql, args).fetchone()
                return None if row is None else _whole(self._db, key, row)
            finally:
                if self._db.in_transaction:  # SQLite rolls back by itself on an I/O or memory error: that one is raised
                    self._db.execute("COMMIT")

    def versions(self, key: PageKey) -> int:
        """How many versions of the page exist (they are numbered 1..n)."""
        with self._lock:
            (count,) = self._db.execute("SELECT COUNT(*) FROM pages WHERE " + _KEY_WHERE, _key_args(key)).fetchone()
        return int(count)

    def save_page(
        self,
        key: PageKey,
        version: int,
        seed: int,
        title: str,
        html: str,
        seconds: float,
        answered: int = 0,
        replied: int = 0,
        mount: str | None = None,
        read: Sequence[int] | None = None,
        wait: bool = True,
        base: tuple[int, float] | None = None,
        exact: bool = False,
    ) -> StoredPage:
        """Store a finished page. If that version was stored meanwhile (another process), the stored one wins. ``read``:
        the ids of every post of the page's thread when its run began (its prompt held them, or the newest of them;
        None: not known, as for a version stored before genui kept it); the newest is kept with the version, for
        ``delete_post``. When one of them has been deleted meanwhile, nothing is stored and ReadPostDeleted is raised,
        in the transaction that would store it, so a deletion is either before it, and refuses it, or after it, and
        deletes the version with the post. A version whose version before it is gone (deleted while it was written)
        raises EarlierVersionsDeleted, and nothing is stored; so does one written from a stored version (``base``: its
        number and created, for a run that keeps that version's HTML) that is gone, though another of its number was
        written since (the page forgotten, then written again by another process: the text kept would be the forgotten
        page's). ``wait=False``: another process holding the cache is a "locked" sqlite3.OperationalError at once
        (is_busy), not after the busy timeout. ``exact``: this text or nothing (a visitor's own choice): a version
        stored first with other text raises VersionTaken."""
        with self._transaction(wait) as db:
            if read:  # ids are never reused (AUTOINCREMENT): the thread's posts up to the newest read are those read
                sql = "SELECT COUNT(*) FROM posts WHERE site = ? AND path = ? AND id <= ?"
                (left,) = db.execute(sql, (key.site, key.path, max(read))).fetchone()
                if left < len(set(read)):
                    raise ReadPostDeleted(f"a post {key.site}{key.path} was written after has been deleted")
            if version > 1:
                before = db.execute(
                    f"SELECT 1 FROM pages WHERE {_KEY_WHERE} AND version = ?", (*_key_args(key), version - 1)
                )
                if before.fetchone() is None:
                    raise EarlierVersionsDeleted(f"the versions of {key.site}{key.path} before {version} are gone")
            if base is not None:
                kept = db.execute(
                    f"SELECT 1 FROM pages WHERE {_KEY_WHERE} AND version = ? AND created = ?", (*_key_args(key), *base)
                )
                if kept.fetchone() is None:
                    raise EarlierVersionsDeleted(f"version {base[0]} of {key.site}{key.path}, written from, is gone")
            inserted = db.execute(
                "INSERT OR IGNORE INTO pages (site, path, query, model, template, posts, version, seed, title, html,"
                " seconds, created, answered, replied, mount, read_upto)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    *_key_args(key),
                    *(version, seed, title, html, seconds, time.time(), answered, max(answered, replied), mount),
                    None if read is None else max(read, default=0),
                ),
            ).rowcount
            if inserted and version > 2:
                _compact(db, key, version - 1)
            row = db.execute(
                f"SELECT {_PAGE_COLUMNS}, continues FROM pages WHERE " + _KEY_WHERE + " AND version = ?",
                (*_key_args(key), version),
            ).fetchone()
            stored_page = _whole(db, key, row)
        assert stored_page is not None  # its chain was read in this transaction
        if exact and not inserted and stored_page.html != html:
            raise VersionTaken(f"version {version} of {key.site}{key.path} was stored first by another process")
        return stored_page

    def title(self, site: str, path: str, query: str = "") -> str | None:
        """The title of the newest stored page at this URL, whatever model or template wrote it."""
        with self._lock:
            row = self._db.execute(
                "SELECT title FROM pages WHERE site = ? AND path = ? AND query = ? AND title != ''"
                " ORDER BY created DESC LIMIT 1",
                (site, path, query),
            ).fetchone()
        return None if row is None else str(row[0])

    def written(self, site: str, model: str, template: str, prefix: str = "/", limit: int = 100) -> list[WrittenPage]:
        """The URLs whose page ``model`` has written from ``template`` (a route's version), newest first, each once
        with its newest title; only paths that start with ``prefix``."""
        found: dict[tuple[str, str], WrittenPage] = {}
        with self._lock:
            # Newest first down the template's index, until ``limit`` URLs: a page shows this on every view, and a
            # GROUP BY read every version the site has ever had. (Not LIKE, which ignores case: /r/linux/ would
            # take /r/Linux/'s threads.)
            rows = self._db.execute(
                "SELECT path, query, title FROM pages INDEXED BY pages_by_template"
                " WHERE site = ? AND model = ? AND template = ? AND substr(path, 1, length(?)) = ?"
                " ORDER BY created DESC",
                (site, model, template, prefix, prefix),
            )
            for path, query, title in rows:
                found.setdefault((path, query), WrittenPage(path, query, title))  # its newest version's title
                if len(found) == limit:
                    break
            rows.close()
        return list(found.values())

    def counted(self, site: str, model: str, templates: Iterable[str]) -> tuple[int, int]:
        """How many pages (URLs) and versions ``model`` has written from these ``templates`` (route versions)."""
        chosen = list(templates)
        with self._lock:
            row = self._db.execute(
                "SELECT COUNT(DISTINCT path || char(0) || query), COUNT(*) FROM pages INDEXED BY pages_by_template"
                f" WHERE site = ? AND model = ? AND template IN ({', '.join('?' * len(chosen))})",
                (site, model, *chosen),
            ).fetchone()
        return int(row[0]), int(row[1])

    def listed(self, site: str, model: str, template: str) -> list[ListedPage]:
        """Each URL whose page ``model`` has written from ``template`` (a route's version), newest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT path, query, title, version, created, seen FROM pages INDEXED BY pages_by_template"
                " WHERE site = ? AND model = ? AND template = ? ORDER BY created DESC",
                (site, model, template),
            ).fetchall()
        found: dict[tuple[str, str], ListedPage] = {}
        for path, query, title, number, created, seen in rows:
            page = found.get((path, query))
            if page is None:
                found[(path, query)] = ListedPage(path, query, title, number, 1, created, seen)
            else:
                shown = max((when for when in (page.seen, seen) if when is not None), default=None)
                found[(path, query)] = replace(page, versions=page.versions + 1, seen=shown)
        return list(found.values())

    def newest_writer(self, site: str) -> tuple[str, float] | None:
        """The model that wrote ``site``'s newest page, and when (None: it has no pages)."""
        with self._lock:
            row = self._db.execute(
                "SELECT model, created FROM pages WHERE site = ? ORDER BY created DESC LIMIT 1", (site,)
            ).fetchone()
        return None if row is None else (str(row[0]), float(row[1]))

    def posts_by_thread(self, site: str) -> dict[str, int]:
        """How many posts each of ``site``'s threads holds, by its path."""
        with self._lock:
            rows = self._db.execute("SELECT path, COUNT(*) FROM posts WHERE site = ? GROUP BY path", (site,)).fetchall()
        return {str(path): int(n) for path, n in rows}

    def page_groups(self) -> list[PageGroup]:
        """What the cache holds, one row for each site, model, template version and posts key."""
        with self._lock:
            rows = self._db.execute(
                "SELECT site, model, template, posts, COUNT(DISTINCT path || char(0) || query), COUNT(*),"
                " SUM(LENGTH(CAST(html AS BLOB))) FROM pages GROUP BY site, model, template, posts"
                " ORDER BY site, MAX(created) DESC"
            ).fetchall()
        return [PageGroup(*row) for row in rows]

    def delete_group(self, group: PageGroup) -> int:
        """Delete every page of ``group`` (its site, model, template and posts key); how many versions went."""
        with self._transaction() as db:
            cursor = db.execute(
                "DELETE FROM pages WHERE site = ? AND model = ? AND template = ? AND posts = ?",
                (group.site, group.model, group.template, group.posts),
            )
        return cursor.rowcount

    def note_seen(self, shown: dict[tuple[PageKey, int], float]) -> None:
        """Note when each page version was last shown (a time.time()), in one transaction that does not wait for
        another process holding the cache (a "locked" error at once: is_busy)."""
        sql = f"UPDATE pages SET seen = MAX(COALESCE(seen, 0), ?) WHERE {_KEY_WHERE} AND version = ?"
        with self._transaction(wait=False) as db:
            db.executemany(sql, [(at, *_key_args(key), version) for (key, version), at in shown.items()])

    def unseen(
        self, sites: Sequence[str], before: float, *, delete: bool = False, besides: Sequence[PageGroup] = ()
    ) -> tuple[int, int]:
        """The pages of these sites (by any model, from any config) neither written nor shown since ``before`` (a
        time.time()), but for threads that hold readers' posts and the pages of ``besides`` (groups deleted
        otherwise): how many pages and versions; deleted, in one transaction, when ``delete``."""
        skipped = {(group.site, group.model, group.template, group.posts) for group in besides}
        marks = ", ".join("?" * len(sites))

        def stale(db: sqlite3.Connection) -> list[tuple[Any, ...]]:
            threads = set(db.execute(f"SELECT DISTINCT site, path FROM posts WHERE site IN ({marks})", tuple(sites)))
            rows = db.execute(
                f"SELECT site, path, query, model, template, posts, COUNT(*) FROM pages WHERE site IN ({marks})"
                " GROUP BY site, path, query, model, template, posts HAVING MAX(MAX(created, COALESCE(seen, 0))) < ?",
                (*sites, before),
            )
            return [row for row in rows if (row[0], row[1]) not in threads and (row[0], *row[3:6]) not in skipped]

        if delete:
            with self._transaction() as db:
                found = stale(db)
                db.executemany("DELETE FROM pages WHERE " + _KEY_WHERE, [row[:6] for row in found])
        else:
            with self._lock:
                found = stale(self._db)
        return len(found), sum(row[6] for row in found)

    def unkept_mounts(self, site: str, templates: list[str]) -> list[tuple[int, str, str, str, str]]:
        """(rowid, template, path, query, html) of the site's pages stored under these templates by a genui that
        kept no mount."""
        if not templates:
            return []
        marks = ", ".join("?" * len(templates))
        with self._lock:
            rows = self._db.execute(
                "SELECT rowid, template, path, query, html FROM pages"
                f" WHERE site = ? AND mount IS NULL AND template IN ({marks})",
                (site, *templates),
            ).fetchall()
        return [
            (int(rowid), str(template), str(path), str(query), str(html)) for rowid, template, path, query, html in rows
        ]

    def move_pages(self, moves: list[tuple[int, str, str, str | None]]) -> int:
        """Give pages (rowid, earlier template, new template, mount) a new template and mount, in one transaction.
        A page's versions move all or none: where its new key holds a version already (written since, say, while
        serving with --reload), they all stay, so that no two histories are spliced into one. A rowid that no
        longer holds a page of the earlier template without a mount stays too (another process deleted it, and SQLite
        gave its rowid to another). How many versions moved."""
        if not moves:
            return 0
        moved = 0
        with self._transaction() as db:
            taken: dict[PageKey, bool] = {}  # a new key -> it held a version before this moved any
            for rowid, earlier, template, mount in moves:
                row = db.execute(
                    "SELECT site, path, query, model, posts FROM pages WHERE rowid = ? AND template = ?"
                    " AND mount IS NULL",
                    (rowid, earlier),
                ).fetchone()
                if row is None:
                    continue
                site, path, query, model, posts = row
                key = PageKey(site, path, query, model, template, posts)
                if key not in taken:
                    held = db.execute(f"SELECT 1 FROM pages WHERE {_KEY_WHERE} LIMIT 1", _key_args(key)).fetchone()
                    taken[key] = held is not None
                if not taken[key]:
                    moved += db.execute(
                        "UPDATE pages SET template = ?, mount = ? WHERE rowid = ?", (template, mount, rowid)
                    ).rowcount
        return moved

    def mounts(self, site: str) -> list[str]:
        """The mounts the site's stored pages were written under ("", "/wiki", "/team3/wiki": genui serve
        --base-path), not counting pages stored before mounts were kept (they have none)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT DISTINCT mount FROM pages WHERE site = ? AND mount IS NOT NULL", (site,)
            ).fetchall()
        return [mount for (mount,) in rows]

    def stored_paths(self, site: str) -> list[str]:
        """Every path the site has pages or readers' posts stored under."""
        with self._lock:
            rows = self._db.execute(
                "SELECT path FROM pages WHERE site = ? UNION SELECT path FROM posts WHERE site = ?", (site, site)
            ).fetchall()
        return [path for (path,) in rows]

    def rehome(self, site: str, moves: dict[str, str]) -> tuple[int, int, list[tuple[str, str]]]:
        """Move what is stored under each old path of ``moves`` to its new path, in one transaction: every reader's
        post, and each page's versions all or none (none where the new path holds that page already, so that no two
        histories are spliced into one). How many posts and page versions moved, and the (path, query) of each page
        that stayed.

        A thread's versions show the posts up to their ``answered`` and answer those up to their ``replied``: a post
        moved into a thread that has shown or answered posts after it (the same thread at both spellings, each with
        its posts) would be in none of its versions and never answered. So the old path's posts are then stored
        again, in their order, as the thread's newest (their times kept), to be shown below it and answered; the
        versions moved with them read their new ids."""
        posts = versions = 0
        stayed: list[tuple[str, str]] = []
        with self._transaction() as db:
            for old, new in moves.items():
                (seen,) = db.execute(
                    "SELECT COALESCE(MAX(MAX(answered, replied)), 0) FROM pages WHERE site = ? AND path = ?",
                    (site, new),
                ).fetchone()
                ids = [
                    i
                    for (i,) in db.execute("SELECT id FROM posts WHERE site = ? AND path = ? ORDER BY id", (site, old))
                ]
                renumbered: dict[int, int] = {}
                if ids and ids[0] <= seen:
                    for post_id in ids:
                        cursor = db.execute(
                            "INSERT INTO posts (site, path, user, text, created, sent)"
                            " SELECT site, ?, user, text, created, sent FROM posts WHERE id = ?",
                            (new, post_id),
                        )
                        assert cursor.lastrowid is not None
                        renumbered[post_id] = cursor.lastrowid
                    db.execute("DELETE FROM posts WHERE site = ? AND path = ?", (site, old))
                else:
                    db.execute("UPDATE posts SET path = ? WHERE site = ? AND path = ?", (new, site, old))
                posts += len(ids)
                keys = db.execute(
                    "SELECT DISTINCT query, model, template, posts FROM pages WHERE site = ? AND path = ?", (site, old)
                ).fetchall()
                for query, model, template, keyed_posts in keys:
                    moved = (site, new, query, model, template, keyed_posts)
                    if db.execute(f"SELECT 1 FROM pages WHERE {_KEY_WHERE} LIMIT 1", moved).fetchone() is not None:
                        stayed.append((old, query))
                        continue
                    was = (site, old, query, model, template, keyed_posts)
                    if renumbered:  # what its versions showed and answered, by the posts' new ids
                        for version, answered, replied in db.execute(
                            f"SELECT version, answered, replied FROM pages WHERE {_KEY_WHERE}", was
                        ).fetchall():
                            marks = (_renumbered(answered, renumbered), _renumbered(replied, renumbered))
                            db.execute(
                                f"UPDATE pages SET answered = ?, replied = ? WHERE {_KEY_WHERE} AND version = ?",
                                (*marks, *was, version),
                            )
                    versions += db.execute(f"UPDATE pages SET path = ? WHERE {_KEY_WHERE}", (new, *was)).rowcount
        return posts, versions, sorted(set(stayed))

    def rename_site(self, old: str, new: str, *, replace: bool = False) -> tuple[int, int, int]:
        """Store what is stored for site ``old`` (its pages' versions, readers' posts, the folder it was served
        from) under site ``new``, in one transaction: a site whose ``name`` changed. How many page versions and
        posts moved, and how many versions of ``new``'s were deleted first (``replace``: pages written under the new
        name since, before its old name's were moved). SiteRenameRefused where ``old`` holds nothing, or ``new``
        holds posts, or pages and not ``replace``: two sites' histories are never spliced into one."""
        with self._transaction() as db:

            def count(table: str, site: str) -> int:
                (rows,) = db.execute(f"SELECT COUNT(*) FROM {table} WHERE site = ?", (site,)).fetchone()
                return int(rows)

            if not count("pages", old) and not count("posts", old):
                raise SiteRenameRefused(
                    f"the page cache holds nothing of a site named {old!r}", "name the site's old name, then its new"
                )
            if taken := count("posts", new):
                raise SiteRenameRefused(
                    f"{new!r} holds {taken} readers' post(s) already, which are never deleted",
                    f"genui posts --site {new} lists them; delete them (genui posts delete ID) to rename onto {new}",
                )
            replaced = count("pages", new)
            if replaced and not replace:
                raise SiteRenameRefused(
                    f"{new!r} holds {replaced} page version(s) already (written since the rename)",
                    "add --replace to delete them first",
                )
            db.execute("DELETE FROM pages WHERE site = ?", (new,))
            pages = db.execute("UPDATE pages SET site = ? WHERE site = ?", (new, old)).rowcount
            # the images of its assets folder (genui.assets) are named by the site's name: theirs now
            db.execute(
                "UPDATE pages SET html = REPLACE(html, ?, ?) WHERE site = ?",
                (f"/_genui/assets/{old}/", f"/_genui/assets/{new}/", new),
            )
            posts = db.execute("UPDATE posts SET site = ? WHERE site = ?", (new, old)).rowcount
            # the folder it was served from, which genui cache judges its pages by (the new name's own, if noted)
            db.execute("UPDATE OR IGNORE served SET site = ? WHERE site = ?", (new, old))
            db.execute("DELETE FROM served WHERE site = ?", (old,))
        return pages, posts, replaced

    def holds(self, site: str) -> tuple[int, int]:
        """How many page versions and readers' posts are stored for ``site``."""
        with self._lock:
            (pages,) = self._db.execute("SELECT COUNT(*) FROM pages WHERE site = ?", (site,)).fetchone()
            (posts,) = self._db.execute("SELECT COUNT(*) FROM posts WHERE site = ?", (site,)).fetchone()
        return int(pages), int(posts)

    def pages_by(self, model: str, sites: Sequence[str]) -> int:
        """How many pages (URLs) of these ``sites`` that ``model`` wrote are stored."""
        marks = ", ".join("?" * len(sites))
        with self._lock:
            (pages,) = self._db.execute(
                "SELECT COUNT(DISTINCT site || char(0) || path || char(0) || query) FROM pages"
                f" WHERE model = ? AND site IN ({marks})",
                (model, *sites),
            ).fetchone()
        return int(pages)

    def names_served_from(self, folder: Path) -> list[str]:
        """The site names servers have served ``folder`` under, as noted (record_served), the newest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT site FROM served WHERE folder = ? ORDER BY at DESC", (str(folder.resolve()),)
            ).fetchall()
        return [name for (name,) in rows]

    def forget(self, site: str, path: str, query: str = "") -> int:
        """Delete every version of the page at this URL, whatever model or template wrote it (its posts stay);
        how many versions went."""
        with self._transaction() as db:
            cursor = db.execute("DELETE FROM pages WHERE site = ? AND path = ? AND query = ?", (site, path, query))
        return cursor.rowcount

    def flush_journal(self) -> bool:
        """Copy the write-ahead log into the file and empty it, so that what was deleted is in neither: whether it
        was emptied (False while another process, a server, reads it; it empties at that one's next checkpoint)."""
        with self._lock:
            busy, _, _ = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return not busy

    def vacuum(self) -> bool:
        """Give the space of deleted rows back to the file system: whether the file is smaller now, or only once
        whoever reads it meanwhile (a server) has let go. It holds the file's write lock meanwhile: a server writing
        to it waits (a reader's post 1 s, then a 503; a page written tries again for 30 s, KEEP_WAIT_S);
        sqlite3.OperationalError when one is writing."""
        with self._lock:
            self._db.execute("VACUUM")  # in WAL mode it writes the smaller file into the WAL: a checkpoint copies it
            busy, _, _ = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return not busy

    # -- posts -------------------------------------------------------------------------------------------------

    def add_post(
        self, site: str, path: str, user: str, text: str, wait: bool = True, sent: str | None = None
    ) -> StoredPost:
        """Store a post (checked with check_post); it is committed when this returns. A form sent twice (a double
        click, a resend after a dropped answer) is not stored twice, that post returned: the same post again from the
        form that sent it (``sent``: its token, the reply form's own), whenever and whatever was posted between; or,
        with no token, the thread's newest within ``SAME_POST_S``. ``wait=False`` as for save_page."""
        return self.stored_post(site, path, user, text, wait, sent)[0]

    def stored_post(
        self, site: str, path: str, user: str, text: str, wait: bool = True, sent: str | None = None
    ) -> tuple[StoredPost, bool]:
        """``add_post``'s post, and whether it was stored now (False: the form's post, stored before)."""
        user, text = check_post(user, text)
        created = time.time()
        with self._transaction(wait) as db:
            if (first := _sent_before(db, site, path, user, text, created, sent)) is not None:
                return first, False
            cursor = db.execute(
                "INSERT INTO posts (site, path, user, text, created, sent) VALUES (?, ?, ?, ?, ?, ?)",
                (site, path, user, text, created, sent),
            )
        assert cursor.lastrowid is not None
        return StoredPost(cursor.lastrowid, user, text, created), True

    def resent(self, site: str, path: str, user: str, text: str, sent: str | None = None) -> StoredPost | None:
        """The stored post that ``add_post`` would return for this one, sent again (see there); None when it would
        store a new post. Raises PostRejected as add_post does. Asked just before add_post, in the same synchronous
        stretch of the event loop, both see the same newest post (only another process could post in between, and
        then add_post still stores no post twice)."""
        user, text = check_post(user, text)
        with self._lock:
            return _sent_before(self._db, site, path, user, text, time.time(), sent)

    def post_counts(self) -> dict[str, int]:
        """How many posts each site has."""
        with self._lock:
            rows = self._db.execute("SELECT site, COUNT(*) FROM posts GROUP BY site ORDER BY site").fetchall()
        return {site: int(count) for site, count in rows}

    def threads_with_posts(self, site: str) -> list[str]:
        """The paths of ``site``'s threads that hold readers' posts."""
        with self._lock:
            rows = self._db.execute("SELECT DISTINCT path FROM posts WHERE site = ?", (site,)).fetchall()
        return [str(path) for (path,) in rows]

    def carried_from(self, key: PageKey) -> PageKey | None:
        """Where a thread with readers' posts that has no version under ``key`` was written last under another model
        or route version (an edited site, an upgraded model); None where ``key`` has versions, or none was."""
        with self._lock:
            return _carried_from(self._db, key)

    def carry_thread(self, key: PageKey, wait: bool = True) -> int:
        """Copy every version of the thread ``carried_from`` finds under ``key``, in one transaction: a thread's
        conversation is its readers' posts and the replies written to them, and an edit of its site or a new model
        wrote it whole again, its posts listed under it unanswered. The copies keep their text, dates, mount and the
        posts they answered; the versions they were copied from stay (an earlier config's, to prune). How many
        versions were copied (0: none, or ``key`` had versions by then). ``wait`` as for ``save_page``."""
        with self._transaction(wait) as db:
            source = _carried_from(db, key)
            if source is None:
                return 0
            kept = "version, seed, title, html, seconds, created, answered, replied, mount, continues, seen, read_upto"
            copied = db.execute(
                f"INSERT OR IGNORE INTO pages (site, path, query, model, template, posts, {kept})"
                f" SELECT site, path, query, ?, ?, posts, {kept} FROM pages WHERE {_KEY_WHERE}",
                (key.model, key.template, *_key_args(source)),
            )
            return int(copied.rowcount)

    def thread_posts(self, site: str, paths: list[str]) -> dict[str, int]:
        """How many posts each of ``paths`` (threads of ``site``, a navigation list's: at most 200) has, those with
        any."""
        marks = ", ".join("?" * len(paths))
        with self._lock:
            rows = self._db.execute(
                f"SELECT path, COUNT(*) FROM posts WHERE site = ? AND path IN ({marks}) GROUP BY path", (site, *paths)
            ).fetchall()
        return {str(path): int(count) for path, count in rows}

    def recent_posts(
        self,
        site: str | None = None,
        path: str | None = None,
        limit: int = 50,
        user: str | None = None,
        holding: str | None = None,
    ) -> list[PlacedPost]:
        """The newest posts first, of one site or all, of one thread or all, by one name or any, holding these words
        or any (``holding``: letter case and the way accents are written aside, as NFC and casefold have them, and
        any run of spaces and line breaks as one space, as ``genui posts`` lists a post on one line)."""
        sql, args = "SELECT site, path, id, user, text, created FROM posts", []
        filters = (("site", site), ("path", path), ("user", user))
        wheres = [(column, value) for column, value in filters if value is not None]
        if wheres:
            sql += " WHERE " + " AND ".join(f"{column} = ?" for column, _ in wheres)
            args = [value for _, value in wheres]
        if holding is None:
            with self._lock:
                rows = self._db.execute(sql + " ORDER BY id DESC LIMIT ?", (*args, limit)).fetchall()
            return [PlacedPost(site, path, StoredPost(*post)) for site, path, *post in rows]
        words = _folded(holding)
        with self._lock:  # read in turn, newest first, until ``limit`` hold the words (a moderator's command)
            cursor = self._db.execute(sql + " ORDER BY id DESC", args)
            found: list[PlacedPost] = []
            for site_name, post_path, *post in cursor:
                if words in _folded(post[2]):
                    found.append(PlacedPost(site_name, post_path, StoredPost(*post)))
                    if len(found) >= limit:
                        break
            cursor.close()
        return found

    def posts_before(
        self, created: float | None, site: str | None = None, path: str | None = None, user: str | None = None
    ) -> list[int]:
        """The ids of the posts made before ``created`` (seconds since the epoch; None: any time), of one site or
        all, of one thread or all, under one name or any, oldest first."""
        filters = [(c, value) for c, value in (("site", site), ("path", path), ("user", user)) if value is not None]
        sql = "SELECT id FROM posts WHERE " + ("created < ?" if created is not None else "1")
        sql += "".join(f" AND {column} = ?" for column, _ in filters)
        args = [created] if created is not None else []
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY id", (*args, *(value for _, value in filters)))
            return [post_id for (post_id,) in rows]

    def delete_post(self, post_id: int, *, dry_run: bool = False) -> DeletedPost | None:
        """Delete a post, and every version of its thread from the first that may have read it or shows it
        (``replied``, ``answered`` or the newest post its run read at least its id; where that newest is not known,
        a version stored before genui kept it, stored after the post) on, in one transaction: the versions left
        run from 1 as before, and none holds the post's text. None when there is no such post. ``dry_run``: say
        what would go, and delete nothing."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT site, path, id, user, text, created FROM posts WHERE id = ?", (post_id,)
            ).fetchone()
            if row is None:
                return None
            site, path, *columns = row
            post = StoredPost(*columns)
            deleted, shown = 0, post_id
            # A rewrite keeps the ``replied`` of the version it rewrote, though its prompt had every post: what a run
            # read is ``read_upto``. A version stored after the post but by a run that began before it did not read
            # it (a moderator's review: deleting a spam post took the replies to the post before it).
            keys = db.execute(
                "SELECT query, model, template, posts, MIN(version) FROM pages WHERE site = ? AND path = ?"
                " AND (replied >= ? OR answered >= ? OR read_upto >= ? OR (read_upto IS NULL AND created >= ?))"
                " GROUP BY query, model, template, posts",
                (site, path, post_id, post_id, post_id, post.created),
            ).fetchall()
            for query, model, template, posts, first in keys:
                where, args = f"{_KEY_WHERE} AND version >= ?", (site, path, query, model, template, posts, first)
                count, answered = db.execute(
                    f"SELECT COUNT(*), MAX(answered) FROM pages WHERE {where}", args
                ).fetchone()
                deleted, shown = deleted + count, max(shown, answered or 0)
                if not dry_run:
                    db.execute(f"DELETE FROM pages WHERE {where}", args)
                    _newest_whole(db, PageKey(site, path, query, model, template, posts))
            # the later posts those versions showed, answered in place there: their replies go too
            (later,) = db.execute(
                "SELECT COUNT(*) FROM posts WHERE site = ? AND path = ? AND id > ? AND id <= ?",
                (site, path, post_id, shown),
            ).fetchone()
            if not dry_run:
                db.execute("DELETE FROM posts WHERE id = ?", (post_id,))
        return DeletedPost(PlacedPost(site, path, post), deleted, later)

    def newer_posts(self, site: str, path: str, after: int) -> tuple[int, int | None]:
        """How many of the thread's posts came after post ``after``, and the first of them (its id; None: none)."""
        with self._lock:
            count, first = self._db.execute(
                "SELECT COUNT(*), MIN(id) FROM posts WHERE site = ? AND path = ? AND id > ?", (site, path, after)
            ).fetchone()
        return int(count), first

    def posts(self, site: str, path: str) -> list[StoredPost]:
        """The thread's posts, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, user, text, created FROM posts WHERE site = ? AND path = ? ORDER BY id", (site, path)
            ).fetchall()
        return [StoredPost(*row) for row in rows]


_PAGE_COLUMNS = "version, seed, title, html, seconds, created, answered, replied, mount"
_KEY_WHERE = "site = ? AND path = ? AND query = ? AND model = ? AND template = ? AND posts = ?"


def _sent_before(
    db: sqlite3.Connection, site: str, path: str, user: str, text: str, now: float, sent: str | None = None
) -> StoredPost | None:
    """The post this one (checked) is, sent again: the post the same form (``sent``) stored with the same user and
    text, or the thread's newest if it has them and is under ``SAME_POST_S`` old (a double click, a resend after a
    dropped answer). The one rule for add_post and Store.resent."""
    if sent is not None:  # the form that sent it, sent again: the same post, though others came between (a review)
        row = db.execute(
            "SELECT id, created FROM posts WHERE site = ? AND path = ? AND sent = ? AND user = ? AND text = ?",
            (site, path, sent, user, text),
        ).fetchone()
        if row is not None:
            return StoredPost(int(row[0]), user, text, float(row[1]))
    last = db.execute(
        "SELECT id, user, text, created FROM posts WHERE site = ? AND path = ? ORDER BY id DESC LIMIT 1", (site, path)
    ).fetchone()
    if last is not None and (last[1], last[2]) == (user, text) and 0 <= now - last[3] < SAME_POST_S:
        return StoredPost(int(last[0]), user, text, float(last[3]))
    return None


def _joined(db: sqlite3.Connection, key: PageKey, version: int) -> str:
    """Version ``version``'s whole HTML: its row joined onto the rows since the last version stored whole (see
    _compact); "" when a version it continues is gone."""
    where = f"{_KEY_WHERE} AND version <= ?"
    rows = db.execute(
        f"SELECT version, continues, html FROM pages WHERE {where} AND version >= "
        f"(SELECT COALESCE(MAX(version), 0) FROM pages WHERE {where} AND continues = 0) ORDER BY version",
        (*_key_args(key), version, *_key_args(key), version),
    ).fetchall()
    if not rows or rows[0][1] or rows[-1][0] != version or rows[-1][0] - rows[0][0] != len(rows) - 1:
        return ""
    return "".join(html for _, _, html in rows)


def _compact(db: sqlite3.Connection, key: PageKey, version: int) -> None:
    """Store ``version``, no longer the newest, as what follows the version before it where it starts with that one
    whole (a thread's replies written in place): a thread of n replies takes space in n, not n squared, and reading a
    version joins exactly its own bytes, from the rows since the last version stored whole. The newest version is
    always stored whole, so that a genui of layout 1 that has the file open still reads and extends it right."""
    whole = _joined(db, key, version)
    before = _joined(db, key, version - 1)
    if not whole or not before or not whole.startswith(before):
        return
    compacted = db.execute(
        # a page from a genui that kept no mount stays whole: genui.upgrade reads its links to give it one
        f"UPDATE pages SET html = ?, continues = 1 WHERE {_KEY_WHERE} AND version = ? AND continues = 0"
        " AND mount IS NOT NULL",
        (whole[len(before) :], *_key_args(key), version),
    ).rowcount
    if compacted and db.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")  # a row only this layout reads: the file is its now


def _newest_whole(db: sqlite3.Connection, key: PageKey) -> None:
    """Store the page's newest version whole again, after its later versions were deleted (see _compact)."""
    row = db.execute(
        f"SELECT version, continues FROM pages WHERE {_KEY_WHERE} ORDER BY version DESC LIMIT 1", _key_args(key)
    ).fetchone()
    if row is not None and row[1]:
        db.execute(
            f"UPDATE pages SET html = ?, continues = 0 WHERE {_KEY_WHERE} AND version = ?",
            (_joined(db, key, row[0]), *_key_args(key), row[0]),
        )


def _whole(db: sqlite3.Connection, key: PageKey, row: tuple[object, ...]) -> StoredPage | None:
    """A stored row (``_PAGE_COLUMNS``, then ``continues``) as its whole page; None when a version it continues is
    missing (every deletion takes a page's later versions with it, so none should be)."""
    *columns, continues = row
    page = StoredPage(key, *columns)  # type: ignore[arg-type]
    if continues:
        html = _joined(db, key, page.version)
        if not html:
            return None
        page = replace(page, html=html)
    return page


def _carried_from(db: sqlite3.Connection, key: PageKey) -> PageKey | None:
    if db.execute(f"SELECT 1 FROM pages WHERE {_KEY_WHERE} LIMIT 1", _key_args(key)).fetchone() is not None:
        return None
    if db.execute("SELECT 1 FROM posts WHERE site = ? AND path = ? LIMIT 1", (key.site, key.path)).fetchone() is None:
        return None
    row = db.execute(  # the key written last: a thread carried before keeps its source's dates, and adds its own
        "SELECT model, template FROM pages WHERE site = ? AND path = ? AND query = ? AND posts = ?"
        " ORDER BY created DESC, rowid DESC LIMIT 1",
        (key.site, key.path, key.query, key.posts),
    ).fetchone()
    return None if row is None else replace(key, model=row[0], template=row[1])


def _key_args(key: PageKey) -> tuple[object, ...]:
    return (key.site, key.path, key.query, key.model, key.template, key.posts)
