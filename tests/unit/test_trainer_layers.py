"""The 2-layer cross-encoder's layer selection (trainer `num_layers`)."""

from __future__ import annotations

import pytest

transformers = pytest.importorskip("transformers")


def test_keep_layers_keeps_evenly_spaced_layers_ending_with_the_top() -> None:
    from fixgraph.training.cross_encoder import keep_layers

    config = transformers.BertConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=6, num_attention_heads=2, intermediate_size=64, num_labels=1
    )
    network = transformers.BertForSequenceClassification(config)
    layers = list(network.bert.encoder.layer)
    keep_layers(network, 2)
    assert [id(m) for m in network.bert.encoder.layer] == [id(layers[2]), id(layers[5])]
    assert network.config.num_hidden_layers == 2
    with pytest.raises(ValueError, match="num_layers=3 but the base model has 2 layers"):
        keep_layers(network, 3)
