"""List, check or fetch what a profile's external models read (``helpers.zoo.needs``).

python -m helpers.book.running.downloads --profile paper list       # each item: ok or MISSING
python -m helpers.book.running.downloads --profile paper check      # exit 1 with what is missing
python -m helpers.book.running.downloads --profile paper download   # fetch it (make data PROFILE=paper)
"""

from __future__ import annotations

import argparse
import sys

from ...zoo.locations import MissingDownloadError
from ...zoo.needs import check_local, download, needs
from ..profiles.profile import load_profile


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="List, check or download what a profile's models read.")
    parser.add_argument("--profile", default="paper")
    parser.add_argument("action", choices=["list", "check", "download"])
    args = parser.parse_args(argv)
    models = load_profile(args.profile).models
    if args.action == "list":
        for n in needs(models):
            print(f"{'ok     ' if n.present() else 'MISSING'} [{n.model}] {n.what}: {n.path}")
        return 0
    if args.action == "check":
        try:
            check_local(args.profile, models)
        except MissingDownloadError as err:
            print(err, file=sys.stderr)
            return 1
        print(f"everything profile {args.profile!r} reads is in place")
        return 0
    left = download(models)
    for n in left:
        print(f"[{n.model}] {n.what}: do this by hand: {n.how}; expected at {n.path}", file=sys.stderr)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
