"""Per-dataset settings of the published code, read by the presets through the config resolver ``published``.

``${published:METHOD,${dataset.name},KEY,DEFAULT}`` is ``PUBLISHED[METHOD][dataset][KEY]`` when the table lists the
dataset, else DEFAULT (gnnq's value for the datasets the authors did not configure). ``experiment=adaqp_published``
reads its assignment cycle, group size and epochs here, so ``gnnq experiment=adaqp_published dataset=yelp`` runs
Yelp's published settings; ``sweep=adaqp_paper`` reads the epochs and partition counts for every method. A value
given on the command line (``quantizer.group_size=100``) replaces the table's, as any override does.
"""

from __future__ import annotations

from omegaconf import OmegaConf

from gnnq.errors import ConfigError

RESOLVER = "published"

# AdaQP (Wan et al., MLSys 2023), raywan-110/AdaQP at 6bb6701: AdaQP/config/<dataset>.yaml (runtime.num_epoches,
# assignment.assign_cycle, assignment.group_size; so 5 assignment cycles per run on every dataset) and
# scripts/<dataset>_all.sh (2 machines x 1 or 2 GPUs for Reddit and Yelp, x 2 or 4 for the other two: partitions).
# The four configs agree on everything else, which the adaqp presets set for every dataset: 3 layers, hidden 256,
# dropout 0.5, LayerNorm, Adam lr 0.01 without weight decay, lambda 0.5, 8 bits before the first assignment, and
# 200 profiled message sizes (profile_data_length; quantizer.profile_range=published).
PUBLISHED: dict[str, dict[str, dict[str, int | list[int]]]] = {
    "adaqp": {
        "reddit": {"epochs": 500, "assign_cycle": 100, "group_size": 100, "partitions": [2, 4]},
        "yelp": {"epochs": 1000, "assign_cycle": 200, "group_size": 1000, "partitions": [2, 4]},
        "ogbn-products": {"epochs": 250, "assign_cycle": 50, "group_size": 2000, "partitions": [4, 8]},
        "amazon-products": {"epochs": 1200, "assign_cycle": 240, "group_size": 500, "partitions": [4, 8]},
    },
}


def published_value(method: str, dataset: str, key: str, default=None):
    """The published ``key`` of ``method`` on ``dataset``; ``default`` for a dataset the table does not list.

    ``key`` may index a list (``partitions.1``). ConfigError for an unknown method or key."""
    table = PUBLISHED.get(str(method))
    if table is None:
        known = ", ".join(PUBLISHED)
        raise ConfigError(f"${{{RESOLVER}:...}}: no published settings for method {method!r}; known: {known}")
    settings = table.get(str(dataset))
    name, _, index = str(key).partition(".")
    known = {k for row in table.values() for k in row}
    if name not in known:
        raise ConfigError(f"${{{RESOLVER}:{method},...}}: no key {name!r}; known: {', '.join(sorted(known))}")
    if settings is None:
        return default
    value = settings[name]
    return value[int(index)] if index else value


def register() -> None:
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, published_value)


register()
