"""An unknown WANDB_MODE in the environment is named in one line with the values W&B accepts (issue 31 item 15),
before W&B's own settings validation fails with an error that names neither the variable nor logger.mode."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from gnnq.config.compose import compose_config
from gnnq.errors import GnnqError
from gnnq.track.wandb_logger import WandbLogger, check_wandb_mode_env


def test_unknown_wandb_mode_is_named_with_the_allowed_values(monkeypatch, tmp_path):
    monkeypatch.setenv("WANDB_MODE", "sometimes")
    cfg = compose_config(["logger=wandb"])
    with pytest.raises(GnnqError) as e:
        WandbLogger(OmegaConf.create(OmegaConf.to_container(cfg)), tmp_path)
    line = str(e.value)
    assert "\n" not in line
    assert "WANDB_MODE=sometimes" in line and "online, offline" in line and "logger=none" in line


@pytest.mark.parametrize("mode", [None, "offline", "disabled"])
def test_known_or_absent_wandb_mode_passes(monkeypatch, mode):
    if mode is None:
        monkeypatch.delenv("WANDB_MODE", raising=False)
    else:
        monkeypatch.setenv("WANDB_MODE", mode)
    check_wandb_mode_env()
