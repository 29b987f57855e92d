"""Bad requests raise a HeadSpecError that says what is wrong, and change nothing."""

import pytest
import torch
from tiny_models import bert, fairseq_wmt

import helpers


def snapshot(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def assert_unchanged(model, before):
    after = model.state_dict()
    assert after.keys() == before.keys()
    assert all(torch.equal(after[k], before[k]) for k in before)


BAD = [
    ({"enc_self": {0: [1]}}, "unknown attention kind 'enc_self'; this model has kinds \\['self'\\]"),
    ({"self": {2: [1]}}, "layer 2 is out of range for kind 'self': valid layers are 0..1"),
    ({"self": {-1: [1]}}, "layer -1 is out of range"),
    ({"self": {0: [4]}}, "head 4 is out of range for self layer 0: valid heads are 0..3"),
    ({"self": {0: [1, 1]}}, "a head is listed twice"),
    ({"self": {0: ["1"]}}, "head must be an int"),
    ({"self": {"0": [1]}}, "layer must be an int"),
    # a valid first entry followed by a bad one: the valid one must not be applied either
    ({"self": {0: [2], 1: [9]}}, "head 9 is out of range"),
]


@pytest.mark.parametrize("spec, message", BAD)
def test_bad_prune_request_changes_nothing(spec, message):
    case = bert()
    before = snapshot(case.model)
    with pytest.raises(helpers.HeadSpecError, match=message):
        helpers.prune_heads(case.model, spec)
    assert_unchanged(case.model, before)
    assert all(s.num_heads == 4 for s in helpers.attention_sites(case.model))


@pytest.mark.parametrize("spec, message", BAD[:4] + BAD[5:6])
def test_bad_mask_request_is_explained(spec, message):
    case = bert()
    with helpers.HeadGates(case.model) as gates:
        with pytest.raises(helpers.HeadSpecError, match=message):
            gates.mask(spec)


def test_pruning_a_head_twice_is_refused():
    case = fairseq_wmt()
    helpers.prune_heads(case.model, {"enc_dec": {1: [2]}})
    before = snapshot(case.model)
    with pytest.raises(helpers.HeadSpecError, match="head 2 of enc_dec layer 1 was already pruned"):
        helpers.prune_heads(case.model, {"enc_self": {0: [0]}, "enc_dec": {1: [2]}})
    assert_unchanged(case.model, before)
    assert helpers.pruned_heads(case.model) == {"enc_dec": {1: [2]}}


def test_unknown_kind_on_gates_lists_kinds():
    with helpers.HeadGates(fairseq_wmt().model) as gates:
        with pytest.raises(helpers.HeadSpecError, match="this model has kinds"):
            gates.tensor("self")


def test_loading_a_folder_without_record_is_explained(tmp_path):
    with pytest.raises(FileNotFoundError, match="save_pruned"):
        helpers.load_pruned(tmp_path)


def test_loading_into_another_family_is_refused(tmp_path):
    helpers.save_pruned(bert().model, tmp_path)
    with pytest.raises(ValueError, match="holds a bert model but a fairseq model was given"):
        helpers.load_pruned(tmp_path, model=fairseq_wmt().model)
