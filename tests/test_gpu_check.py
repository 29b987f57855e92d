"""The GPU check runs its every pass and check at reduced sizes on a CPU; at the paper's sizes it
refuses a CPU and says why."""

import pandas as pd

from helpers.book.running import gpu_check


def test_the_gpu_check_runs_every_pass_at_reduced_sizes(tmp_path, capsys):
    out = tmp_path / "gpu_check.csv"
    assert gpu_check.main(["--reduced", "--out", str(out)]) == 0
    table = pd.read_csv(out)
    assert table["pass"].tolist() == [
        "wmt BLEU sweep",
        "wmt likelihood sweep",
        "bert accuracy sweep",
        "bert importance",
        "wmt importance",
        "iwslt BLEU curve",
        "fused vs explicit attention",
        "out-of-memory fallback",
        "smollm2 perplexity sweep",
        "smollm2 copying probe",
        "smollm2 cached generation",
        "smollm2 plain cache",
        "smollm2 window cache",
        "smollm2 fp8 cache",
        "smollm2 quanto 4-bit cache",
        "smollm2 heavy hitters cache",
    ]
    assert not table["note"].astype(str).str.contains("FAILED").any()
    timed = table[table["pass"] != "fused vs explicit attention"]
    assert (timed["seconds"] > 0).all()
    decoding = table[table["pass"].str.contains("BLEU")]
    assert (decoding["configs_per_pass"] == 12).all()  # a CPU's choice (sweep_decoder.CPU_CONFIGS_PER_PASS)
    notes = dict(zip(table["pass"], table["note"]))
    assert "within the rounding bound" in notes["fused vs explicit attention"]
    assert notes["out-of-memory fallback"].startswith("halved after an out-of-memory error")
    assert "translations equal" in notes["out-of-memory fallback"]
    assert "wmt BLEU sweep" in capsys.readouterr().out


def test_the_gpu_check_at_the_papers_sizes_needs_a_gpu(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SIXTEEN_HEADS_DEVICE", "cpu")
    assert gpu_check.main(["--out", str(tmp_path / "x.csv")]) == 2
    assert "await a GPU" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()
