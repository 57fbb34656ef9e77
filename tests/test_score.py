"""score.py: every config of a graph ranked, best first."""

from __future__ import annotations

import numpy as np
import pytest

from xlarank.data.graph import load_graph
from xlarank.errors import XlarankError
from xlarank.frame import read_frame
from xlarank.rank.spec import load_ranker_spec
from xlarank.rank.train import train_ranker
from xlarank.score import npz_inputs, ranked_configs


def test_ranked_configs_keep_every_index(samples, frames, spec_dir):
    train, meta = read_frame(frames["default", "layout-xla-default", "train"])
    ranker = train_ranker(train, meta, load_ranker_spec(spec_dir / "lgbm.toml"))
    unet = load_graph(next(p for p in samples if p.stem == "unet3d"))
    order, score = ranked_configs(unet, ranker)
    assert sorted(order) == list(range(unet.n_configs))
    assert (np.diff(score) <= 0).all()


def test_npz_inputs_lists_folders_and_files(tiny_data, tmp_path):
    folder = tiny_data / "npz" / "tile"
    loose = tmp_path / "loose.npz"
    assert npz_inputs([folder, loose]) == sorted(folder.rglob("*.npz")) + [loose]
    (tmp_path / "empty").mkdir()
    with pytest.raises(XlarankError, match="no npz files"):
        npz_inputs([tmp_path / "empty"])
