"""docs/config.md is what gnnq.config.reference generates from the registries and the schema."""

from __future__ import annotations

from gnnq.config.reference import DOC, main, render
from gnnq.config.registry import group_registries


def test_docs_config_md_is_up_to_date():
    assert DOC.is_file(), "docs/config.md is missing: python -m gnnq.config.reference"
    assert DOC.read_text() == render(), "docs/config.md is stale: run python -m gnnq.config.reference"
    assert main(["--check"]) == 0


def test_the_reference_lists_every_choice_and_key():
    text = render()
    for group, registry in group_registries().items():
        for choice in registry.choices():
            assert f"`{group}={choice.name}`" in text
            for key in choice.schema.__dataclass_fields__:
                if key != "name":
                    assert f"`{group}.{key}`" in text, f"{group}.{key}"
    assert "`quantizer.variance_weight`" in text and "`trainer.optimizer`" in text


def test_the_readme_lists_each_groups_choices_as_the_registry_does():
    """The README's short list of config groups is a view of the registries, not a second source."""
    import re

    from gnnq.config.registry import OPTIMIZERS
    from tests.conftest import REPO

    section = (REPO / "README.md").read_text().split("## Config groups", 1)[1].split("\n## ", 1)[0]
    listed = {
        m.group(1): re.findall(r"`([\w-]+)`", m.group(2)) for m in re.finditer(r"^- `(\w+)`: (.*)$", section, re.M)
    }
    for group, registry in group_registries().items():
        assert group in listed, f"README's config groups omit {group}"
        if group != "dataset":  # datasets: a prose summary pointing to docs/datasets.md
            assert tuple(listed[group]) == registry.names(), (
                f"README lists {group}: {listed[group]}; registry: {registry.names()}"
            )
    assert OPTIMIZERS.names()  # trainer.optimizer's choices are in docs/config.md only
