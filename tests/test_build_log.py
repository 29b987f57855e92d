"""The build says where it is, its log holds no false alarms, and bad parameters are refused
before anything runs."""

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.book.running import runner
from helpers.book.store import progress

ROOT = Path(__file__).resolve().parent.parent


# ---- progress lines ---------------------------------------------------------------------------


def test_durations_read_naturally():
    assert progress.duration(42.4) == "42 s"
    assert progress.duration(210) == "3.5 min"
    assert progress.duration(3900) == "1 h 05 min"


def test_the_estimate_sums_the_recorded_times_of_what_is_left():
    recorded = {"a": 60.0, "b": 120.0, "c": 600.0}
    assert progress.estimate_left(["b", "c"], recorded) == "about 12.0 min left (last recorded times)"
    assert progress.estimate_left(["b", "c"], recorded, parallel=2) == "about 6.0 min left (last recorded times)"
    assert progress.estimate_left(["b", "new"], recorded) == (
        "about 2.0 min left for the 1 of 2 with a recorded time (last recorded times)"
    )
    assert progress.estimate_left(["new"], recorded).startswith("no estimate of what is left yet")
    assert progress.estimate_left([], recorded) == "nothing left"
    line = progress.progress_line(6, 14, name="06_pruning_curves", elapsed=738, estimate="about 20.5 min left")
    assert line == "[6/14] 06_pruning_curves: 12.3 min so far, about 20.5 min left"


def test_recorded_times_are_read_from_the_results(tmp_path, monkeypatch):
    monkeypatch.setenv("SIXTEEN_HEADS_RESULTS", str(tmp_path))
    assert progress.recorded_chapter_seconds("p") == {}
    (tmp_path / "p" / "run_times.csv").write_text("notebook,seconds,finished\n01_a,12.5,x\n02_b,3.0,y\n")
    assert progress.recorded_chapter_seconds("p") == {"01_a": 12.5, "02_b": 3.0}
    (tmp_path / "p" / "models.json").write_text('{"models": {"m@0": {"train_seconds": 61.0}, "n": {}}}')
    assert progress.recorded_model_seconds("p") == {"m@0": 61.0}


# ---- parameters checked before anything runs ------------------------------------------------------


def _snapshot(folder: Path) -> dict:
    return {p: p.stat().st_mtime_ns for p in folder.rglob("*")} if folder.exists() else {}


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "nosuch=1",
            r"unknown parameter 'nosuch': the chapter does not declare it\. Parameters: 03_ablating_one_head: "
            r"classifier, .*\bbeam\b",
        ),
        ("beems=1", r"unknown parameter 'beems'"),
        (
            "beam=five",
            r"parameter beam='five' does not fit chapter 03_ablating_one_head: it takes a whole number "
            r"\(its default is 5\)",
        ),
        ("alpha=[1, 2]", r"parameter alpha=\[1, 2\] does not fit chapter 03_ablating_one_head: it takes a number"),
        (
            "n_resamples=-5",
            r"parameter n_resamples=-5 is out of range \(-p n_resamples=\.\.\. for chapter 03_ablating_one_head\): "
            r"it takes a count, a whole number >= 1 \(its default is 1000\)",
        ),
        ("max_examples=-1", r"parameter max_examples=-1 is out of range .*a whole number >= 0"),
        ("alpha=1.5", r"parameter alpha=1\.5 is out of range .*strictly between 0 and 1"),
        ("alpha=0", r"parameter alpha=0\.0 is out of range"),
    ],
)
def test_bad_parameters_are_refused_before_anything_runs(override, message, tmp_path, monkeypatch):
    monkeypatch.setenv("SIXTEEN_HEADS_RESULTS", str(tmp_path / "results"))
    before = _snapshot(tmp_path)
    with pytest.raises(SystemExit, match=message):
        runner.main(
            [
                "--profile",
                "smoke",
                "--only",
                "03_ablating_one_head",
                "-p",
                override,
                "--output-dir",
                str(tmp_path / "executed"),
            ]
        )
    assert _snapshot(tmp_path) == before  # no result file and no executed notebook written
    assert not (tmp_path / "executed").exists()


def test_a_parameter_given_twice_is_refused_before_anything_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("SIXTEEN_HEADS_RESULTS", str(tmp_path / "results"))
    with pytest.raises(SystemExit, match=r"parameter beam is given twice \(-p beam=5 and -p beam=3\): give it once"):
        runner.main(
            [
                "--profile",
                "smoke",
                "--only",
                "03_ablating_one_head",
                "-p",
                "beam=5",
                "-p",
                "beam=3",
                "--output-dir",
                str(tmp_path / "executed"),
            ]
        )
    assert not (tmp_path / "results").exists() and not (tmp_path / "executed").exists()


@pytest.mark.parametrize(
    "name, value",
    [
        ("alpha", 0.01),
        ("alpha", 0.999),
        ("prune_share", 0.0),
        ("prune_share", 1.0),
        ("step", 1.0),
        ("max_examples", 0),
        ("beam", 1),
        ("batch_sizes", [1, 64]),
        ("margins", {"BLEU": 0.5, "perplexity": 0.02}),
        ("bleu", "detokenized"),
        ("max_len_a", 0.0),
    ],
)
def test_values_inside_their_range_pass(name, value):
    from helpers.book.profiles.parameters import range_problem

    assert range_problem(name, value) is None


@pytest.mark.parametrize(
    "name, value",
    [
        ("alpha", 1.0),
        ("prune_share", 1.2),
        ("speed_share", -0.1),
        ("step", 0.0),
        ("beam", 0),
        ("importance_examples", -3),
        ("batch_sizes", [0, 64]),
        ("epochs", [1, -2]),
        ("margins", {"BLEU": 0}),
        ("margins", {"accuracy": "one"}),
        ("bleu", "detokenised"),
        ("max_len_a", -1.0),
    ],
)
def test_values_outside_their_range_are_named(name, value):
    from helpers.book.profiles.parameters import range_problem

    assert range_problem(name, value)


BAD_PROFILES = [
    ("nosuch: 1\n", r"bad\.yml: unknown key\(s\) \['nosuch'\]"),
    ("notebooks:\n  03_ablating_one_hed: {}\n", r"bad\.yml: notebooks: \['03_ablating_one_hed'\] is not a chapter"),
    (
        "notebooks:\n  03_ablating_one_head:\n    beems: 3\n",
        r"bad\.yml: notebooks: 03_ablating_one_head: beems is not a "
        r"parameter of that chapter; it has classifier, ",
    ),
    (
        "notebooks:\n  03_ablating_one_head:\n    beam: five\n",
        r"bad\.yml: notebooks: 03_ablating_one_head: beam: parameter "
        r"beam='five' does not fit",
    ),
    (
        "notebooks:\n  03_ablating_one_head:\n    n_resamples: -5\n",
        r"parameter n_resamples=-5 is out of range "
        r"\(.*bad\.yml: notebooks: 03_ablating_one_head: n_resamples\)",
    ),
    (
        "defaults:\n  alpha: 2\nnotebooks:\n  03_ablating_one_head: {}\n",
        r"bad\.yml: defaults: alpha\).*strictly between 0 and 1",
    ),
    ("defaults:\n  nosuch: 2\n", r"bad\.yml: defaults: nosuch is a parameter of no chapter"),
    ("defaults: [1, 2]\n", r"bad\.yml: defaults: a mapping of name: value, not list"),
    ("models:\n  nli: 3\n", r"bad\.yml: models: nli: a mapping of settings, not 3"),
    ("description: [a, b]\n", r"bad\.yml: description: a line of text"),
    ("- a list\n", r"bad\.yml: a profile is a mapping"),
]


def _bad_profile(text: str, tmp_path, monkeypatch) -> None:
    """Profile ``bad`` with ``text``, in a profiles folder of its own."""
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "bad.yml").write_text(text)
    monkeypatch.setenv("SIXTEEN_HEADS_PROFILES", str(tmp_path / "profiles"))


@pytest.mark.parametrize("text, message", BAD_PROFILES)
def test_a_bad_profile_builds_no_model(text, message, tmp_path, monkeypatch):
    from helpers.book import course

    _bad_profile(text, tmp_path, monkeypatch)
    monkeypatch.setenv("SIXTEEN_HEADS_CACHE", str(tmp_path / "cache"))
    with pytest.raises(SystemExit, match=message):
        course.main(["--profile", "bad"])  # `make models` refuses it before building anything
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("text, message", BAD_PROFILES)
def test_a_bad_profile_is_refused_naming_the_key_and_the_file(text, message, tmp_path, monkeypatch):
    _bad_profile(text, tmp_path, monkeypatch)
    monkeypatch.setenv("SIXTEEN_HEADS_RESULTS", str(tmp_path / "results"))
    with pytest.raises(SystemExit, match=message):
        runner.main(["--profile", "bad", "--output-dir", str(tmp_path / "executed")])
    assert not (tmp_path / "results").exists() and not (tmp_path / "executed").exists()


def test_the_books_profiles_pass_the_check():
    from helpers.book.profiles import Profile, load_profile

    for name in ("smoke", "course", "paper"):  # load_profile checks them
        settings = load_profile(name)
        assert isinstance(settings, Profile) and settings.name == name and settings.notebooks and settings.models


def test_an_override_goes_only_to_the_chapters_that_declare_it():
    from helpers.book.profiles.parameters import checked_overrides

    sources = {n: runner.NOTEBOOKS / f"{n}.ipynb" for n in ("01b_pruning_by_importance", "03_ablating_one_head")}
    checked = checked_overrides(sources, {"beam": 3, "prune_share": 1})
    assert checked == {"01b_pruning_by_importance": {"prune_share": 1.0}, "03_ablating_one_head": {"beam": 3}}
    assert isinstance(
        checked["01b_pruning_by_importance"]["prune_share"], float
    )  # an int is taken where a float is expected
    with pytest.raises(SystemExit, match="no chapter run here declares it"):
        checked_overrides(sources, {"nosuch": 1})


# ---- a clean log --------------------------------------------------------------------------------


def test_a_new_classifier_head_is_one_line_not_a_load_report(capsys, caplog):
    from helpers.zoo import registry

    with caplog.at_level(logging.WARNING):
        model, _ = registry.load_model("minilm", num_labels=3)
    out = capsys.readouterr()
    assert "LOAD REPORT" not in caplog.text + out.out + out.err
    assert re.search(
        r"encoder 'minilm', new classification head \(classifier\.bias, classifier\.weight\) "
        r"initialised from seed \d+",
        out.out,
    )
    assert model.config.num_labels == 3


def test_a_real_loading_problem_is_still_reported_in_full(tmp_path, caplog):
    """A checkpoint that lacks encoder weights (a masked-LM checkpoint has no pooler, and weights
    a classifier does not use) keeps transformers' full report."""
    from transformers import AutoModelForSequenceClassification, BertConfig, BertForMaskedLM

    from helpers.zoo.registry import _from_pretrained

    config = BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    )
    BertForMaskedLM(config).save_pretrained(tmp_path)
    with caplog.at_level(logging.WARNING):
        _from_pretrained(AutoModelForSequenceClassification, tmp_path, "masked-lm", 0, num_labels=2)
    assert "LOAD REPORT" in caplog.text and "pooler" in caplog.text


def _run(args: list[str], env: dict) -> str:
    done = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout + done.stderr


def _own_deprecations(log: str) -> list[str]:
    """Deprecation warnings whose source file is in this project (helpers/, notebooks, tests)."""
    pattern = re.compile(r"^(?P<file>\S+?\.py):\d+: (?:\w+\.)*(?:Deprecation|PendingDeprecation|Future)Warning", re.M)
    own = (str(ROOT / "helpers"), str(ROOT / "tests"), "<ipython-input", "/tmp/ipykernel")
    return [m.group(0) for m in pattern.finditer(log) if m["file"].startswith(own)]


@pytest.mark.slow  # builds the smoke models and runs a chapter in a subprocess
def test_smoke_model_build_and_runner_log_is_clean(tmp_path):
    """The smoke model build from an empty cache and a chapter run hold no LOAD REPORT table, no
    kernel warning about TCP, and no deprecation warning raised in our own files (warnings that
    Python hides by default are shown here)."""
    env = {
        **os.environ,
        "SIXTEEN_HEADS_CACHE": str(tmp_path / "cache"),
        "SIXTEEN_HEADS_RESULTS": str(tmp_path / "results"),
        "HF_HUB_OFFLINE": "1",
        "PYTHONWARNINGS": "default::DeprecationWarning,default::PendingDeprecationWarning",
        "SIXTEEN_HEADS_BUILD_PROCESSES": "2",
    }
    log = _run(["-m", "helpers.book.course", "--profile", "smoke"], env)
    # "12 s so far", or "1.1 min so far" past a minute (a slow or busy machine)
    assert re.search(r"^\[1/\d+\] \[\S+\] built in \d+ s: (\d+ s|\d+\.\d min) so far", log, re.M), log[-2000:]
    # two processes train side by side: each says when it starts and, per translation epoch, where it
    # is, every line led by its model's name; no bar of ours or of transformers
    for seed in (0, 1):
        assert re.search(rf"^\[translation@{seed}\] training \(translation, seed {seed}\) in ", log, re.M), log[-2000:]
        epochs = re.findall(rf"^\[translation@{seed}\] epoch (\d+)/(\d+): train loss [\d.]+, valid loss", log, re.M)
        assert [int(e) for e, _ in epochs] == list(range(1, int(epochs[0][1]) + 1)), (
            epochs,
            [line for line in log.splitlines() if "epoch" in line],
        )
    assert not re.search(r"Loading weights|Writing model shards|fine-tune:", log)
    assert f"summary in {tmp_path / 'results' / 'smoke' / 'models.json'}" in log
    # SmolLM2 converted once, in a build process beside the last models (chapter 11 reads its tokenizer)
    assert len(re.findall(r"^\[smollm2\] ready in \d+ s: ", log, re.M)) == 1, log[-2000:]
    log += _run(
        [
            "-m",
            "helpers.book.running.runner",
            "--profile",
            "smoke",
            "--only",
            "03_ablating_one_head",
            "--output-dir",
            str(tmp_path / "executed"),
        ],
        env,
    )
    assert re.search(
        r"^\[1/1\] 03_ablating_one_head \(smoke\): 0 s so far, no estimate of what is left yet", log, re.M
    )
    assert "LOAD REPORT" not in log
    assert "Kernel is running over TCP" not in log
    assert _own_deprecations(log) == []


# ---- the front door -----------------------------------------------------------------------------


def test_readme_is_short_and_its_runner_commands_pass_the_parameter_check():
    from helpers.book.profiles import load_profile
    from helpers.book.profiles.parameters import parse_overrides
    from helpers.book.profiles.profile import check_runner_command

    text = (ROOT / "README.md").read_text()
    assert len(text) <= 8000, f"README.md has {len(text)} characters; the front door stays under 8,000"
    commands = re.findall(r"^(\.venv/bin/python -m helpers\.book\.running\.runner .+)$", text, re.M)
    assert commands, "the README shows how to rerun a chapter"
    for command in commands:
        profile = load_profile(re.search(r"--profile (\S+)", command)[1])
        chapter, overrides = check_runner_command(command)
        assert chapter in profile.notebooks
        assert overrides == parse_overrides(re.findall(r"-p (\S+)", command))
    for target in re.findall(r"make ([\w-]+)", text):
        assert re.search(rf"^{target}:", (ROOT / "Makefile").read_text(), re.M), (
            f"make {target} is not a Makefile target"
        )


def _write_lines(tag: str, count: int, start) -> None:
    from helpers.zoo.model_cache import log_line

    start.wait()  # both processes write at the same time
    for i in range(count):
        log_line(f"[{tag}] epoch {i}/{count}: train loss 1.234, valid loss 2.345 (85 s)")


def test_lines_of_two_build_processes_never_interleave():
    """Two processes that share an unbuffered stderr (PYTHONUNBUFFERED=1, as on this machine) each write
    many lines at once; every line arrives whole (``print`` would write the text and its
    newline apart, and mangle about half of them here)."""
    script = (
        "import sys; from multiprocessing import get_context; import tests.test_build_log as t\n"
        "if __name__ == '__main__':\n"
        "    ctx = get_context('spawn'); start = ctx.Barrier(2)\n"
        "    ps = [ctx.Process(target=t._write_lines, args=(tag, 5000, start)) for tag in ('a@0', 'b@1')]\n"
        "    [p.start() for p in ps]; [p.join() for p in ps]\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stderr.splitlines()
    assert len(lines) == 10000
    mangled = [
        line
        for line in lines
        if not re.fullmatch(r"\[(a@0|b@1)\] epoch \d+/5000: train loss 1\.234, valid loss 2\.345 \(85 s\)", line)
    ]
    assert mangled == []


# ---- a quiet log: only our own lines -----------------------------------------------------------------
THIRD_PARTY_BARS = (
    "Converting and de-quantizing",
    "Writing model shards",
    "Loading checkpoint shards",
    "Loading weights",
)


def _noise(text: str) -> list[str]:
    """Third-party bars (transformers' loading and saving, the GGUF reader); the chapters' own
    bars (sweeps, importance) are ours and may stay."""
    return [line for line in text.splitlines() if any(b in line for b in THIRD_PARTY_BARS)]


def test_smoke_chapters_print_no_progress_bars(smoke_executed):
    import nbformat

    noisy = {}
    for name, path in smoke_executed.items():
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            for out in cell.get("outputs", []):
                text = out.get("text", "") or "".join(out.get("data", {}).get("text/plain", ""))
                if _noise(text):
                    noisy.setdefault(name, []).extend(_noise(text)[:2])
    assert not noisy, f"progress bars in the executed chapters: {noisy}"


@pytest.mark.slow
def test_the_smollm2_conversion_is_silent(tmp_path, monkeypatch, capfd):
    from helpers.zoo import shipped
    from helpers.zoo.locations import CONVERTED_ENV

    monkeypatch.setenv(CONVERTED_ENV, str(tmp_path))
    folder = shipped.smollm2_folder()
    assert (folder / "config.json").exists()
    out, err = capfd.readouterr()
    assert not _noise(out + err), _noise(out + err)[:3]


def test_the_teaching_guides_exercises_run_on_the_lab_profile():
    import nbformat

    from helpers.book.profiles.profile import check_runner_command

    guide = nbformat.read(ROOT / "notebooks" / "17_teaching_guide.ipynb", as_version=4)
    commands = [
        m
        for c in guide.cells
        if c.cell_type == "markdown"
        for m in re.findall(r"`(\.venv/bin/python -m helpers\.book\.running\.runner [^`]+)`", c.source)
    ]
    assert len(commands) >= 20
    for command in commands:
        assert "--profile lab " in command, command
        check_runner_command(command)
    with pytest.raises(SystemExit, match="unknown profile"):
        check_runner_command(commands[0].replace("--profile lab", "--profile labb"))


def _exercises() -> list[tuple[str, str]]:
    """Each exercise of the guide: (its runner command, the line under it)."""
    import nbformat

    guide = nbformat.read(ROOT / "notebooks" / "17_teaching_guide.ipynb", as_version=4)
    pattern = r"^\d+\. `(\.venv/bin/python -m helpers\.book\.running\.runner [^`]+)`  \n(.*)$"
    return [m for c in guide.cells if c.cell_type == "markdown" for m in re.findall(pattern, c.source, re.M)]


def test_each_exercise_changes_the_labs_value_and_says_its_cost_and_the_next_step():
    """Under each command: its difficulty and minutes, the lab's own value of the parameter it
    changes (as the lab profile sets it, and not the exercise's), and the command that shows it."""
    import yaml

    from helpers.book.profiles.profile import chapter_parameters, check_runner_command, load_profile

    lab = load_profile("lab")
    exercises = _exercises()
    assert len(exercises) >= 39
    for command, line in exercises:
        chapter, overrides = check_runner_command(command)
        found = re.fullmatch(
            r"   \*(Easy|Medium|Hard), (\d+) min; the lab's own value: `(\w+)=(.+)`; "
            r"then `make pages PROFILE=lab`\.\*  ",
            line,
        )
        assert found, f"{command}: under it, {line!r}"
        name, value = found[3], yaml.safe_load(found[4])
        assert list(overrides) == [name], command
        assert value == chapter_parameters(lab, chapter)[name], f"{command}: the lab runs {name}={value!r}?"
        assert overrides[name] != value, f"{command}: the lab already runs {name}={value!r}"


def test_the_exercise_check_catches_a_stale_lab_value(monkeypatch):
    from helpers.book.profiles import profile as profiles

    real = profiles.chapter_parameters
    monkeypatch.setattr(profiles, "chapter_parameters", lambda s, c: {**real(s, c), "n_pairs": 16})
    with pytest.raises(AssertionError, match=r"the lab runs n_pairs=64|the lab already runs"):
        test_each_exercise_changes_the_labs_value_and_says_its_cost_and_the_next_step()
