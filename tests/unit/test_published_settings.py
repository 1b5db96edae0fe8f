"""AdaQP's per-dataset settings (raywan-110/AdaQP AdaQP/config/<dataset>.yaml) reach the published preset and the
paper sweep, and quantizer.profile_range=published profiles AdaQP's 200 message sizes."""

from __future__ import annotations

import pytest

from gnnq.adaptive.time_model import PUBLISHED_STEPS, published_sizes, sent_sizes
from gnnq.config.compose import compose_config
from gnnq.config.published import published_value
from gnnq.errors import ConfigError

# dataset: (epochs, assign_cycle, group_size) as AdaQP's configs have them
ADAQP = {
    "reddit": (500, 100, 100),
    "yelp": (1000, 200, 1000),
    "ogbn-products": (250, 50, 2000),
    "amazon-products": (1200, 240, 500),
}


@pytest.mark.parametrize("dataset", sorted(ADAQP))
def test_adaqp_published_takes_the_datasets_published_settings(dataset):
    cfg = compose_config(["experiment=adaqp_published", f"dataset={dataset}"])
    q = cfg.quantizer
    assert (cfg.trainer.epochs, q.assign_cycle, q.group_size) == ADAQP[dataset]
    assert q.profile_range == "published"


def test_other_datasets_keep_gnnqs_values_and_overrides_win():
    cfg = compose_config(["experiment=adaqp_published", "dataset=cora"])
    assert (cfg.trainer.epochs, cfg.quantizer.assign_cycle, cfg.quantizer.group_size) == (200, 50, 100)
    cfg = compose_config(["experiment=adaqp_published", "dataset=yelp", "quantizer.group_size=7", "trainer.epochs=300"])
    assert (cfg.trainer.epochs, cfg.quantizer.assign_cycle, cfg.quantizer.group_size) == (300, 200, 7)


def test_paper_sweep_points_take_epochs_cycles_and_partitions_per_dataset():
    point = ["dataset=ogbn-products", "model=sage", "adaqp_paper/partitions@_global_=more", "experiment=adaqp_q"]
    cfg = compose_config(point, "adaqp_paper", "sweeps")
    assert (cfg.trainer.epochs, cfg.cluster.nproc, cfg.quantizer.assign_cycle, cfg.quantizer.group_size) == (
        250,
        8,
        50,
        2000,
    )
    point = ["dataset=yelp", "adaqp_paper/partitions@_global_=fewer", "experiment=pipegcn"]
    cfg = compose_config(point, "adaqp_paper", "sweeps")
    assert (cfg.trainer.epochs, cfg.cluster.nproc, cfg.parallel.name) == (1000, 2, "stale")


def test_published_value_errors_name_the_bad_part():
    assert published_value("adaqp", "cora", "epochs", 7) == 7
    assert published_value("adaqp", "reddit", "partitions.1", 0) == 4
    with pytest.raises(ConfigError, match="no published settings for method 'nope'"):
        published_value("nope", "reddit", "epochs")
    with pytest.raises(ConfigError, match="no key 'lr'"):
        published_value("adaqp", "reddit", "lr")


def test_published_profile_sizes_are_adaqps():
    """AdaQP/assigner/profile.py build_dummy: 200 sizes from low - low/2 to high + low/2, low = rows x min(features,
    hidden) x 2 bits / 8, high = rows x max(features, hidden) x 8 bits / 8 (Reddit: 602 features, hidden 256)."""
    high, low = published_sizes([10, 0, 3], feature_dim=602, hidden=256, bits=[2, 4, 8])
    assert low == [640, 0, 192] and high == [6020, 0, 1806]
    rounds = sent_sizes(high, low, PUBLISHED_STEPS)
    assert PUBLISHED_STEPS == 200 and len(rounds) == 200
    assert rounds[0] == [320, 0, 96] and rounds[-1] == [6340, 0, 1902]
    # features narrower than hidden (ogbn-products: 100 features): min and max swap roles
    assert published_sizes([4], feature_dim=100, hidden=256, bits=[2, 4, 8]) == ([1024], [100])
