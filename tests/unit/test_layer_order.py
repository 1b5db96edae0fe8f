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


@pytest.mark.parametrize("order", ["norm_act_dropout", "dropout_norm_act"])
def test_gamlp_honours_the_layer_order(order):
    """model=gamlp: the same sequence after each hidden linear layer as GNN's (the propagate callable is ignored)."""
    from gnnq.models.gamlp import GAMLP

    torch.manual_seed(0)
    model = GAMLP(6, 8, 3, 3, dropout=0.5, norm="layer", layer_order=order).train()
    with torch.no_grad():
        for norm in model.norms:
            norm.weight.uniform_(0.5, 2.0)
            norm.bias.uniform_(-1.0, 1.0)
    x = torch.randn(10, 6)
    torch.manual_seed(7)
    out = model(x)
    torch.manual_seed(7)
    h = x
    for i, linear in enumerate(model.linears):
        h = linear(h)
        if i < len(model.linears) - 1:
            if order == "dropout_norm_act":
                h = torch.relu(model.norms[i](torch.nn.functional.dropout(h, 0.5, training=True)))
            else:
                h = torch.nn.functional.dropout(torch.relu(model.norms[i](h)), 0.5, training=True)
    torch.testing.assert_close(out, h)


def test_the_model_hands_propagate_the_rows_before_dropout():
    """The seam stale and cached halo rows use: with gnnq's order and dropout on in training, each hidden layer's
    propagate gets the rows before the closing dropout (and that dropout); otherwise nothing."""
    torch.manual_seed(0)
    model = GNN("gcn", 6, 8, 3, 3, dropout=0.5, norm="layer").train()
    seen = {}

    def propagate(layer, h, before):
        seen[layer] = (h, before)
        return h

    model(torch.randn(10, 6), propagate)
    assert seen[0][1] is None  # the input features: no dropout before them
    for layer in (1, 2):
        h, before = seen[layer]
        assert before.dropout is model.dropout and before.rows.requires_grad
        kept = h != 0
        torch.testing.assert_close(h[kept], 2 * before.rows[kept])
    model.eval()
    model(torch.randn(10, 6), propagate)
    assert all(before is None for _, before in seen.values())
    model = GNN("gcn", 6, 8, 3, 3, dropout=0.5, norm="layer", layer_order="dropout_norm_act").train()
    model(torch.randn(10, 6), propagate)
    assert all(before is None for _, before in seen.values())
