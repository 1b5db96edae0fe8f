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
