"""Sweep time of the course models' one-head ablations: the path before issue 19 against today's.

* Translation: the course translation model's 144 one-head configurations (3 kinds x 6 layers
  x 8 heads) plus the unmasked run on ``test13``, greedy, stopping 24 tokens beyond the source
  (the course chapters' settings). Before: one beam search per configuration. Now:
  ``TRANSLATION_CONFIGS_PER_PASS`` configurations share each search (row gates on a repeated
  batch), and decoder-only passes share the encoder's output.
* Classifier: the NLI classifier's 72 configurations on ``matched``, lower layers replayed in
  both. Before: batches in the split's order, the whole forward. Now: batches from the shortest
  example to the longest, ``CLASSIFIER_CONFIGS_PER_PASS`` configurations per pass, the last layer
  at the first token only (``first_token_only``), as ``classifier_effects`` runs it.

Both paths run in this one process on the first training seed's model, and the script checks
that they give the same hypotheses and predictions. It needs the course models
(``make models``); it prints ratios, it asserts nothing about time.

Run: .venv/bin/python benchmarks/bench_sweeps.py [--profile course] [--examples N] [--only translation|classifier]
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from helpers.book import course
from helpers.book.head_effects import CLASSIFIER_CONFIGS_PER_PASS, TRANSLATION_CONFIGS_PER_PASS, translation_sweep
from helpers.book.profiles import load_profile
from helpers.heads.ablation import one_head_configs, single_layer_sweep
from helpers.heads.devices import to_device
from helpers.zoo.classifier_training import batches, by_length, encode, in_order
from helpers.zoo.first_token_only import first_token_only


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def translation(profile: dict, examples: int, per_pass: int) -> None:
    model = course.load_translation(profile, "translation")
    pairs = course.load_data(profile, "translation")["test13"]
    sources = [p.src for p in (pairs[:examples] if examples else pairs)]
    configs = one_head_configs(model)
    settings = dict(beam=1, max_len_b=24, batch_size=64, progress=False)
    before, (base_1, one) = timed(lambda: translation_sweep(model, sources, configs, configs_per_pass=1, **settings))
    now, (base_k, many) = timed(lambda: translation_sweep(model, sources, configs, configs_per_pass=per_pass,
                                                          **settings))
    same = base_1 == base_k and all(one[c] == many[c] for c in configs)
    print(f"translation ({len(configs)} one-head configurations + unmasked, {len(sources)} verses of test13, greedy):")
    print(f"  one configuration per search: {before:.1f} s")
    print(f"  {per_pass} per search:              {now:.1f} s")
    print(f"  ratio {now / before:.3f} (target <= 0.4); same hypotheses: {same}")


def classifier(profile: dict, examples: int, per_pass: int) -> None:
    model, tokenizer = course.load_classifier(profile, "nli")
    data = course.load_data(profile, "nli")["matched"]
    data = data[:examples] if examples else data
    encoded = encode(tokenizer, data, profile["models"]["nli"]["fine_tune"]["max_length"])
    configs = one_head_configs(model)

    def run(m, batch):
        return m(**to_device(batch, m)).logits.argmax(-1)

    before, (base_1, one) = timed(lambda: single_layer_sweep(model, list(batches(encoded, 64)), run, configs,
                                                             progress=False))
    order = by_length(encoded)
    with first_token_only(model):
        now, (base_k, many) = timed(lambda: single_layer_sweep(model, list(batches(encoded, 64, order)), run, configs,
                                                               progress=False, configs_per_pass=per_pass))
    same = torch.equal(base_1, in_order(base_k, order)) and all(torch.equal(one[c], in_order(many[c], order))
                                                                for c in configs)
    print(f"classifier ({len(configs)} one-head configurations + unmasked, {len(data)} examples of matched):")
    print(f"  split order, one per pass:          {before:.1f} s")
    print(f"  by length, {per_pass} per pass, last layer at [CLS]: {now:.1f} s")
    print(f"  ratio {now / before:.3f} (target <= 0.4); same predictions: {same}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", default="course")
    parser.add_argument("--examples", type=int, default=0, help="0: the whole split")
    parser.add_argument("--only", choices=["translation", "classifier"], help="time one of the two sweeps")
    args = parser.parse_args()
    profile = load_profile(args.profile)
    missing = [name for name in ("translation", "nli") if not course.model_dir(profile, name).exists()]
    if missing:
        raise SystemExit(f"bench_sweeps needs the {args.profile} models {missing} (not in {course.model_dir(profile, missing[0]).parent}): "
                         f"run `make models PROFILE={args.profile}` first")
    print(f"{torch.get_num_threads()} threads; both paths in this process, first training seed")
    if args.only != "classifier":
        translation(profile, args.examples, TRANSLATION_CONFIGS_PER_PASS)
    if args.only != "translation":
        classifier(profile, args.examples, CLASSIFIER_CONFIGS_PER_PASS)


if __name__ == "__main__":
    main()
