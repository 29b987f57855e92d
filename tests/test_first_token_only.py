"""A BERT classifier's last layer computed at the first token only gives the full forward's logits."""

import pytest
import torch
from tiny_models import TINY_BERT, seeded_config
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    DistilBertConfig,
    DistilBertForSequenceClassification,
)

import helpers
from helpers.zoo.first_token_only import first_token_only, supports_first_token_only


def tiny_bert(attn: str) -> BertForSequenceClassification:
    config = seeded_config(BertConfig, TINY_BERT, num_hidden_layers=3, attn_implementation=attn)
    return BertForSequenceClassification(config).eval()


def padded_batch() -> dict:
    torch.manual_seed(1)
    ids = torch.randint(5, 50, (6, 9))
    mask = torch.ones_like(ids)
    for row, length in enumerate([9, 7, 5, 9, 3, 6]):
        mask[row, length:] = 0
    return {"input_ids": ids, "attention_mask": mask}


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_logits_equal_the_full_forward_with_padding_gates_and_pruning(attn):
    model, batch = tiny_bert(attn), padded_batch()
    last = model.bert.encoder.layer[-1]
    with torch.no_grad():
        full = model(**batch).logits
        with first_token_only(model) as applied:
            fast = model(**batch).logits
            assert applied and model.bert(**batch).last_hidden_state.shape == (6, 1, 24)  # position 0 only
        torch.testing.assert_close(fast, full, rtol=1e-5, atol=1e-6)
        assert "forward" not in vars(last)  # restored
        unpadded = {"input_ids": batch["input_ids"], "attention_mask": torch.ones_like(batch["attention_mask"])}
        with first_token_only(model):  # no padding: sdpa may pass no mask at all
            fast_unpadded = model(**unpadded).logits
        torch.testing.assert_close(fast_unpadded, model(**unpadded).logits, rtol=1e-5, atol=1e-6)
        spec = {"self": {2: [1, 3], 0: [2]}}  # a gate in the last layer and below
        with helpers.HeadGates(model) as gates:
            gates.mask(spec)
            gated = model(**batch).logits
            with first_token_only(model):
                torch.testing.assert_close(model(**batch).logits, gated, rtol=1e-5, atol=1e-6)
        assert not torch.allclose(gated, full)  # the gates changed the logits
        helpers.prune_heads(model, spec)
        with first_token_only(model):
            torch.testing.assert_close(model(**batch).logits, gated, rtol=1e-5, atol=1e-5)


def test_other_classifiers_are_left_alone():
    config = DistilBertConfig(vocab_size=50, dim=24, n_layers=2, n_heads=4, hidden_dim=48, num_labels=2)
    model = DistilBertForSequenceClassification(config).eval()
    assert not supports_first_token_only(model)
    with torch.no_grad():
        full = model(**padded_batch()).logits
        with first_token_only(model) as applied:
            assert not applied
            torch.testing.assert_close(model(**padded_batch()).logits, full, rtol=0, atol=0)
    assert supports_first_token_only(tiny_bert("sdpa"))
