"""model.layer_order: gnnq's LayerNorm -> ReLU -> dropout after each hidden convolution, or AdaQP's published
dropout -> LayerNorm -> ReLU (AdaQP/model/distGCN.py), checked against the layers applied by hand."""

from __future__ import annotations

import pytest
import torch

from gnnq.models.gnn import GNN


def _by_hand(model: GNN, x: torch.Tensor, order: str, seed: int) -> torch.Tensor:
    torch.manual_seed(seed)
    h = x
    for i, conv in enumerate(model.convs):
        h = conv(h, h)  # the identity aggregation: propagate returns its input
        if i < len(model.convs) - 1:
            if order == "dropout_norm_act":
                h = torch.relu(model.norms[i](torch.nn.functional.dropout(h, 0.5, training=True)))
            else:
                h = torch.nn.functional.dropout(torch.relu(model.norms[i](h)), 0.5, training=True)
    return h


@pytest.mark.parametrize("name", ["gcn", "sage"])
@pytest.mark.parametrize("order", ["norm_act_dropout", "dropout_norm_act"])
def test_layer_order_is_the_named_sequence(name, order):
    torch.manual_seed(0)
    model = GNN(name, 6, 8, 3, 3, dropout=0.5, norm="layer", layer_order=order).train()
    with torch.no_grad():  # LayerNorm's affine parameters away from (1, 0), so the order shows in every output
        for norm in model.norms:
            norm.weight.uniform_(0.5, 2.0)
            norm.bias.uniform_(-1.0, 1.0)
    x = torch.randn(10, 6)
    torch.manual_seed(7)
    out = model(x, lambda layer, h, before: h)
    torch.testing.assert_close(out, _by_hand(model, x, order, seed=7))
    other = "dropout_norm_act" if order == "norm_act_dropout" else "norm_act_dropout"
    assert not torch.allclose(out, _by_hand(model, x, other, seed=7))


def test_unknown_layer_order_names_the_key_and_the_choices():
    with pytest.raises(ValueError, match=r"model\.layer_order='relu_first'.*norm_act_dropout, dropout_norm_act"):
        GNN("gcn", 4, 8, 2, 2, dropout=0.5, norm="layer", layer_order="relu_first")


def test_adaqp_published_preset_runs_adaqps_layer_order_and_gnnqs_preset_keeps_its_own():
    from gnnq.config.compose import compose_config

    published = compose_config(["experiment=adaqp_published"])
    assert (published.model.layer_order, published.quantizer.backward_influence) == ("dropout_norm_act", "adaqp")
    assert compose_config(["experiment=adaqp"]).model.layer_order == "norm_act_dropout"
