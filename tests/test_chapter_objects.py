"""The small objects a chapter builds from its parameters cell, and what the book reads of that cell:
``from_parameters`` takes every field from the parameter of the same name and refuses to guess;
the meaning of each parameter is its comment, beside it or above it; the objects that hold what a
chapter's calls share give the same results as the functions they call."""

from dataclasses import dataclass, field

import pytest
import torch

from helpers.book.chapters import ch11_nine_heads as lm
from helpers.book.chapters import ch14_memory_budget as mb
from helpers.book.experiments import buys_and_breaks as bb
from helpers.book.profiles import from_parameters
from helpers.book.profiles.parameters import parameter_meanings
from helpers.heads.significance import Bootstrap
from helpers.zoo.causal_lm import lm_batches
from helpers.zoo.registry import load_causal_lm


@dataclass(frozen=True)
class Settings:
    step: float
    seed: int
    orders: int = 2
    _cache: dict = field(default_factory=dict)


def test_from_parameters_takes_every_field_from_the_parameter_of_its_name():
    chapter = {"step": 0.25, "seed": 3, "orders": 5, "profile": "smoke", "unrelated": [1]}
    assert from_parameters(Settings, chapter) == Settings(0.25, 3, 5)
    assert from_parameters(Settings, chapter, seed=7) == Settings(0.25, 7, 5)  # given beats the cell
    plan = from_parameters(mb.Plan, {**vars(mb.Plan()), "budgets": [0.5], "residual_length": 8})
    assert plan.budgets == [0.5] and plan.residual_length == 8 and plan.sinks == mb.Plan().sinks


def test_from_parameters_refuses_to_fill_a_field_by_default():
    # ``orders`` has a default, but the chapter declares no such parameter: an error, not a silent 2
    with pytest.raises(TypeError, match=r"Settings takes orders from the chapter's parameters.*add orders"):
        from_parameters(Settings, {"step": 0.25, "seed": 3})
    with pytest.raises(TypeError, match="Settings has no field order; its fields: step, seed, orders"):
        from_parameters(Settings, {"step": 0.25, "seed": 3, "orders": 1}, order=4)
    with pytest.raises(TypeError, match="builds a dataclass"):
        from_parameters(dict, {"step": 0.25})


def test_a_parameters_meaning_is_its_comment_beside_or_above_it():
    source = (
        "# Parameters (papermill injects the profile's values after this cell)\n"
        'profile = "course"\n'
        "beam = 5  # beam width\n"
        "# decoding stops at source length + this many tokens\n"
        "# (the authors: 200)\n"
        "max_len_b = 200\n"
        "seed = 0\n"
        'prompt = (\n    "In the beginning "\n    "God created"\n)  # continued by the model\n'
    )
    assert parameter_meanings(source) == {
        "profile": "",  # the cell's own first line says what the cell is, not what profile is
        "beam": "beam width",
        "max_len_b": "decoding stops at source length + this many tokens (the authors: 200)",
        "seed": "",
        "prompt": "continued by the model",
    }


@pytest.fixture(scope="module")
def tiny_lm():
    return load_causal_lm("tiny-llama", seed=0)  # the smoke profile's Llama, with SmolLM2's tokenizer


def test_the_verse_sweeps_give_what_the_functions_they_call_give(tiny_lm):
    model, tokenizer = tiny_lm
    texts = ["the first verse of it", "and a second one", "a third verse here", "the fourth and last"]
    batches = {"select": lm_batches(tokenizer, texts[:2], 2), "report": lm_batches(tokenizer, texts[2:], 2)}
    boot = Bootstrap(n_resamples=50, min_units=2)
    verses = lm.VerseSweeps(model, batches, configs_per_pass=2, bootstrap=boot)
    grid, _ = lm.one_head_grid(model, batches["select"], configs_per_pass=2, bootstrap=boot, progress=False)
    ours, ppl = verses.keep_one_head(grid)
    theirs, theirs_ppl = lm.keep_one_head(model, grid, batches=batches["report"], configs_per_pass=2, bootstrap=boot)
    assert ours.equals(theirs) and ppl == theirs_ppl
    heads = model.config.num_attention_heads
    importance = {
        "self": torch.rand(model.config.num_hidden_layers, heads, generator=torch.Generator().manual_seed(0))
    }
    curves = verses.pruning_curves(importance, random_orders=1, step=0.5, seed=0)
    assert curves.equals(
        lm.pruning_curves(
            model, importance, batches=batches["report"], random_orders=1, step=0.5, seed=0, configs_per_pass=2
        )
    )


def test_generation_cuts_one_batch_of_prompts_per_batch_size(tiny_lm):
    _, tokenizer = tiny_lm
    texts = [f"verse number {i} of the book" for i in range(12)]
    generation = bb.Generation.from_verses(
        tokenizer, texts, prompt_tokens=6, batch_sizes=[1, 3], new_tokens=2, repeats=1
    )
    assert set(generation.prompts) == {1, 3}
    for size, ids in generation.prompts.items():
        assert torch.equal(ids, bb.prompt_ids(tokenizer, texts, 6, size)) and ids.shape == (size, 6)


def test_a_configuration_is_found_by_its_method_and_budget():
    configs = [
        mb.Config(mb.UNPRUNED, "16-bit cache", 1.0),
        mb.Config(mb.WINDOWED, "a", 0.5),
        mb.Config(mb.WINDOWED, "b", 0.25),
        mb.Config(mb.REMOVED, "c", 0.5),
    ]
    assert mb.configuration(configs, method=mb.WINDOWED, target=0.25).setting == "b"
    assert mb.configuration(configs, method=mb.REMOVED, target=0.5).setting == "c"
