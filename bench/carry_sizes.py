"""What each call of a lease carries, with the working tree that travels with every call: at most 64 MiB a call.

    python3 bench/carry_sizes.py "call 1=.base/part-aa data/adapt-packed.npz data/heldout.jsonl" "call 2=..."

Prints each call's megabytes (the tree's counted in) and exits 1 when one is over the limit or names a file that is
not there, so that bench/gpu_prepare.sh says so here rather than a call failing on the device's time.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

LIMIT = 64 * 1024 * 1024  # bytes a device call carries, the working tree included


def size(path: Path) -> int:
    """Bytes as carried: a symbolic link travels as a link (its own few bytes), not as what it points to."""
    if path.is_symlink():
        return path.lstat().st_size
    if path.is_dir():
        return sum(size(part) for part in path.rglob("*") if part.is_symlink() or part.is_file())
    return path.stat().st_size


def tree_bytes() -> int:
    """The files that travel with every call: tracked ones, and untracked ones git does not ignore."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], capture_output=True, check=True
    ).stdout.decode()
    tree = sum(
        size(Path(name)) for name in listed.split("\0") if name and (Path(name).is_file() or Path(name).is_symlink())
    )
    shared = Path("shared")  # travels with every call where the checkout has one, ignored or not
    if shared.is_dir() and subprocess.run(["git", "check-ignore", "-q", "shared"]).returncode == 0:
        tree += size(shared)
    return tree


def main(calls: list[str]) -> int:
    tree, ok = tree_bytes(), True
    print(f"{'working tree':<12} {tree / 2**20:6.1f} MiB, with every call")
    for call in calls:
        name, _, paths = call.partition("=")
        missing = [path for path in paths.split() if not Path(path).exists()]
        if missing:
            print(f"{name:<12} carries {', '.join(missing)}, which is not there", file=sys.stderr)
            ok = False
            continue
        total = tree + sum(size(Path(path)) for path in paths.split())
        over = total > LIMIT
        ok = ok and not over
        print(f"{name:<12} {total / 2**20:6.1f} MiB{'  OVER the 64 MiB a call carries' if over else ''}: {paths}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
