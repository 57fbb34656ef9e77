"""One renderer per declared bench (bench/benches.py), by bench family: each takes the
bench's published record and returns the page's blocks (paragraphs and Markdown tables)
under its section. bench/publish.py puts them together."""

from __future__ import annotations

from render.autotune import autotune
from render.corpus import corpus, corpus_autotune, corpus_cross, corpus_remeasure
from render.engines import engines
from render.featurize import featurize, featurize_full, full
from render.ingraph import ingraph, rank_graph_command
from render.quality import ablation, quality
from render.startup import score, setup, startup
from render.systems import cross_counts, systems
from render.tile_kernels import tile_kernels

# {bench name: renderer}, one for each bench of bench/benches.py.
RENDERERS = {"setup": setup, "featurize": featurize, "score": score, "startup": startup,
             "ingraph": ingraph,
             "ingraph_noisy": ingraph, "ablation": ablation,
             "engines": engines, "quality": quality, "systems": systems,
             "systems_tile": systems, "systems_fair": systems,
             "systems_competition": systems, "systems_competition_low": systems,
             "systems_rule": systems, "systems_tpugraphs_rule": systems,
             "systems_cross": systems, "systems_counts": cross_counts,
             "systems_scale": systems,
             "tile_kernels": tile_kernels, "tile_kernels_rule": tile_kernels,
             "tile_kernels_curves": tile_kernels,
             "autotune": autotune, "autotune_noisy": autotune,
             "featurize_full": featurize_full, "full": full,
             "ingraph_timing": rank_graph_command, "corpus": corpus,
             "corpus_cross": corpus_cross, "corpus_remeasure": corpus_remeasure,
             "corpus_autotune": corpus_autotune}
