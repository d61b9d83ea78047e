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


def test_checkpoint_layers_recomputes_each_layer_and_leaves_the_gradients_unchanged() -> None:
    """The bi-encoder's `gradient_checkpointing`: with dropout on, the recomputed layers must replay the
    forward pass's masks, or the gradients (and the trained weights) would change."""
    import copy
    from types import SimpleNamespace

    import torch

    from fixgraph.training.bi_encoder import checkpoint_layers

    config = transformers.MPNetConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=3, num_attention_heads=2, intermediate_size=64,
        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
    )  # fmt: skip
    torch.manual_seed(0)
    plain = transformers.MPNetModel(config)
    checkpointed = copy.deepcopy(plain)
    checkpoint_layers([SimpleNamespace(auto_model=checkpointed)])
    ids = torch.randint(3, 64, (4, 12))
    grads, calls = [], []
    for network in (plain, checkpointed):
        count = [0]
        network.encoder.layer[1].attention.register_forward_hook(lambda *_, c=count: c.__setitem__(0, c[0] + 1))
        network.train()
        torch.manual_seed(1)
        network(input_ids=ids).last_hidden_state.pow(2).sum().backward()
        grads.append([p.grad for p in network.parameters() if p.grad is not None])  # the pooler has none
        calls.append(count[0])
    assert calls == [1, 2]  # the checkpointed layer runs again in the backward pass
    assert len(grads[0]) == len(grads[1]) > 0
    assert all(torch.equal(a, b) for a, b in zip(*grads, strict=True))
