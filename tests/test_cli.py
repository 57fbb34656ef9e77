"""The CLI end to end on a tiny synthetic set, its errors, and scoring the real samples."""

from __future__ import annotations

import csv
import json
import shutil

import numpy as np
import pytest
from typer.testing import CliRunner

from xlarank.cli import app
from xlarank.data.collections import COLLECTIONS

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def ok(*args: str):
    result = run(*args)
    assert result.exit_code == 0, result.output + (result.stderr or "")
    return result


@pytest.fixture(scope="module")
def trained(tiny_data, spec_dir, tmp_path_factory, repo_specs):
    """Frames and one model per collection, made through the CLI."""
    work = tmp_path_factory.mktemp("cli")
    ok("featurize", tiny_data, "--spec", repo_specs.features("default"),
       "--out-dir", work / "frames")
    for c in COLLECTIONS:
        frames = work / "frames" / c.slug
        ok("train", frames / "train.parquet", "--spec", spec_dir / "lgbm.toml",
           "--valid", frames / "valid.parquet", "--out", work / "models" / c.slug)
    return work


def test_version():
    assert "xlarank 0.1.0" in ok("--version").output


def test_synth_command(tmp_path):
    ok("synth", tmp_path / "d", "--preset", "tiny", "--seed", "3")
    assert len(list((tmp_path / "d" / "npz").rglob("*.npz"))) == 11 + 4 * 8
    result = run("synth", tmp_path / "d", "--preset", "tiny")
    assert result.exit_code == 2 and "already exists" in result.stderr


def test_synth_noise_options(tmp_path):
    ok("synth", tmp_path / "d", "--preset", "tiny", "--repeat-tau", "0.3,0.45",
       "--tile-noise", "0.001")
    noise = json.loads((tmp_path / "d" / "synth.json").read_text())["noise"]
    assert noise == {"layout_repeat_tau": [0.3, 0.45], "tile_sigma": 0.001}
    ok("synth", tmp_path / "e", "--preset", "tiny", "--repeat-tau", "0.36")
    noise = json.loads((tmp_path / "e" / "synth.json").read_text())["noise"]
    assert noise["layout_repeat_tau"] == [0.36, 0.36] and noise["tile_sigma"] == 0.02
    for option, value, needle in (("--repeat-tau", "1.5", "repeat tau"),
                                  ("--repeat-tau", "0.3,x", "--repeat-tau"),
                                  ("--repeat-tau", "0.1,0.2,0.3", "--repeat-tau"),
                                  ("--repeat-tau", "0.6,0.4", "repeat tau"),
                                  ("--tile-noise", "-0.5", "tile noise")):
        result = run("synth", tmp_path / "bad", "--preset", "tiny", option, value)
        assert result.exit_code == 2 and needle in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
        assert result.stderr.startswith("error:")
        assert not (tmp_path / "bad").exists()


@pytest.mark.slow
def test_pipeline_end_to_end(trained, tiny_data, tmp_path):
    work = trained
    for c in COLLECTIONS:
        for split in ("train", "valid", "test"):
            assert (work / "frames" / c.slug / f"{split}.parquet").exists()
        card = json.loads((work / "models" / c.slug / "card.json").read_text())
        assert card["collection"] == c.id and "validation" in card
        headline = "score" if c.is_tile else "kendall_tau"
        assert np.isfinite(card["validation"][headline])
        # Model and random order, summaries for compare.
        ok("evaluate", work / "frames" / c.slug / "valid.parquet", "--model",
           work / "models" / c.slug, "--name", "xlarank", "--out",
           tmp_path / "r" / "x" / f"{c.slug}.csv")
        ok("evaluate", work / "frames" / c.slug / "valid.parquet", "--random", "--out",
           tmp_path / "r" / "random" / f"{c.slug}.csv")
        per_graph = list(csv.DictReader(open(tmp_path / "r" / "x" / f"{c.slug}.csv")))
        assert len(per_graph) == (3 if c.is_tile else 2)
    table = ok("compare", tmp_path / "r", "--out", tmp_path / "summary.csv").output
    assert "layout:nlp:random" in table and "random" in table and "xlarank" in table
    rows = list(csv.reader(open(tmp_path / "summary.csv")))
    assert len(rows) == 1 + len(COLLECTIONS)

    ok("submit", tiny_data, "--models", work / "models", "--out", tmp_path / "sub.csv")
    submission = list(csv.DictReader(open(tmp_path / "sub.csv")))
    assert len(submission) == 2 + 4 * 2
    for row in submission:
        configs = row["TopConfigs"].split(";")
        if row["ID"].startswith("tile:xla:"):
            assert len(configs) == 5
        else:
            assert row["ID"].startswith("layout:") and len(set(configs)) == len(configs)

    ok("score", tiny_data / "npz" / "tile", "--models", work / "models", "--top", "3",
       "--out", tmp_path / "scores.csv")
    scores = list(csv.DictReader(open(tmp_path / "scores.csv")))
    assert {r["rank"] for r in scores} == {"1", "2", "3"}


@pytest.mark.slow
def test_real_samples_score(trained, samples, tmp_path):
    ok("score", *samples, "--models", trained / "models", "--out", tmp_path / "real.csv")
    rows = list(csv.DictReader(open(tmp_path / "real.csv")))
    per_file = {}
    for r in rows:
        per_file.setdefault(r["file"], []).append(int(r["config_index"]))
    assert len(per_file) == len(samples)
    for path in samples:
        n = int(np.load(path)["config_runtime"].shape[0])
        assert sorted(per_file[str(path)]) == list(range(n))


def test_bad_file_is_one_line_exit_2(tiny_data, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(tiny_data, data)
    victim = sorted((data / "npz" / "tile" / "xla" / "train").glob("*.npz"))[0]
    victim.write_bytes(victim.read_bytes()[:100])
    result = run("featurize", data, "--collection", "tile-xla", "--split", "train",
                 "--out", tmp_path / "f.parquet")
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and str(victim.name) in lines[0] and "Traceback" not in result.stderr
    assert not (tmp_path / "f.parquet").exists()
    result = run("featurize", data, "--collection", "tile-xla", "--split", "train",
                 "--out", tmp_path / "f.parquet", "--skip-bad")
    assert result.exit_code == 0 and "skipped" in result.stderr
    assert (tmp_path / "f.parquet").exists()


def test_user_errors_exit_2(tiny_data, frames, models, tmp_path, repo_specs):
    tile = {split: frames["default", "tile-xla", split] for split in ("valid", "test")}
    cases = [
        ("featurize", tmp_path / "nothing"),
        ("featurize", tiny_data, "--spec", tmp_path / "missing.toml"),
        ("train", tile["test"], "--spec", repo_specs.models("tile-xla"), "--out",
         tmp_path / "m"),
        ("evaluate", tile["test"], "--random"),
        ("evaluate", tile["valid"], "--model", models["layout-xla-default"]),
        ("evaluate", tile["valid"]),
        ("score", tmp_path / "none.npz", "--models", tmp_path, "--out", tmp_path / "s.csv"),
        ("featurize", tiny_data, "--collection", "tile-foo"),
    ]
    for args in cases:
        result = run(*args)
        assert result.exit_code == 2, (args, result.output, result.stderr)
        assert result.stderr.startswith("error:"), (args, result.stderr)


def test_error_text_with_brackets_is_printed_verbatim(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('families = ["graph"]\nradius = 2\n')
    (tmp_path / "npz" / "tile" / "xla" / "train").mkdir(parents=True)
    result = run("featurize", tmp_path, "--spec", spec)
    assert result.exit_code == 2
    assert "unknown keys ['radius']" in result.stderr


def test_rank_graph_command(models, tiny_data, tmp_path):
    graph = sorted((tiny_data / "npz" / "layout" / "xla" / "default" / "valid").glob("*.npz"))[0]
    runtime = np.load(graph)["config_runtime"]
    measured = tmp_path / "measured.csv"
    rows = np.arange(0, len(runtime), 2)
    measured.write_text("config_index,runtime\n"
                        + "".join(f"{i},{runtime[i]}\n" for i in rows))
    out = tmp_path / "ranked.csv"
    result = ok("rank-graph", graph, "--measured", measured, "--out", out,
                "--prior", models["layout-xla-default"])
    assert f"ranked {len(runtime)} configs ({len(rows)} measured)" in result.output
    ranked = list(csv.DictReader(open(out)))
    assert [r["rank"] for r in ranked] == [str(i) for i in range(1, len(runtime) + 1)]
    assert sorted(int(r["config_index"]) for r in ranked) == list(range(len(runtime)))
    assert sum(r["measured"] == "True" for r in ranked) == len(rows)
    # A prior of another collection, and measurements that name no config, are one line.
    for args, message in (
            (("--prior", models["tile-xla"]), "prior model was trained on"),
            (("--measured", tmp_path / "absent.csv"), "cannot read measured runtimes")):
        options = {"--measured": measured, **dict(zip(args[::2], args[1::2]))}
        flat = [x for kv in options.items() for x in kv]
        result = run("rank-graph", graph, *flat, "--out", tmp_path / "x.csv")
        assert result.exit_code == 2 and result.stderr.startswith("error:"), result.stderr
        assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "x.csv").exists()


def test_verbose_lives_in_the_context_not_in_module_state(tiny_data, tmp_path):
    args = ("featurize", tiny_data, "--collection", "tile-xla", "--split", "valid")
    loud = ok("-v", *args, "--out", tmp_path / "a.parquet").output
    assert "feature spec default" in loud
    # The next run without -v says nothing more: no state left over from the last one.
    quiet = ok(*args, "--out", tmp_path / "b.parquet").output
    assert "feature spec" not in quiet and "tile-xla/valid: 3 graphs" in quiet


def test_one_workers_option_for_every_command():
    import typer

    helps = {name: next(p.help for p in command.params if p.name == "workers")
             for name, command in typer.main.get_command(app).commands.items()
             if any(p.name == "workers" for p in command.params)}
    assert set(helps) == {"synth", "featurize", "train", "score"}
    assert len(set(helps.values())) == 1


class _TiltedFamily:
    """A family with weights that no CLI code names: one column holding its weights' seed.
    featurize must reach it through --weights as it reaches gnn and gru."""

    name = "tilted"
    weights = "tilted"
    description = "its weights' seed, in every row"

    def names(self, spec, is_tile):
        return ["tilted"]

    def load_weights(self, source):
        return int(source.removeprefix("random:"))

    def prepare(self, graph, tables, spec):
        return self.load_weights(spec.weights_for(self.weights))

    def columns(self, prepared, configs):
        return np.full((len(configs), 1), prepared, np.float32)


def test_weights_reach_every_family_that_declares_them(tiny_data, tmp_path, monkeypatch):
    from xlarank.features.families import FAMILIES
    from xlarank.frame import read_frame

    args = ("featurize", tiny_data, "--collection", "tile-xla", "--split", "valid",
            "--embedding", "gnn")
    ok(*args, "--weights", "gnn=random:1", "--out", tmp_path / "a.parquet")
    ok(*args, "--gnn-weights", "random:1", "--out", tmp_path / "b.parquet")
    (a, meta_a), (b, meta_b) = (read_frame(tmp_path / f"{x}.parquet") for x in "ab")
    assert meta_a.spec == meta_b.spec and meta_a.spec["gnn"] == "random:1"
    assert a.equals(b)
    monkeypatch.setitem(FAMILIES, "tilted", _TiltedFamily())
    ok("featurize", tiny_data, "--collection", "tile-xla", "--split", "valid", "--embedding",
       "tilted", "--weights", "tilted=random:5", "--out", tmp_path / "c.parquet")
    table, meta = read_frame(tmp_path / "c.parquet")
    assert meta.spec["tilted"] == "random:5" and (table["tilted"] == 5).all()


@pytest.mark.parametrize("weights, needle", [
    (["--weights", "gnn"], "FAMILY=SOURCE"),
    (["--weights", "=random:1"], "FAMILY=SOURCE"),
    (["--weights", "lstm=random:1"], "'lstm'"),
    (["--weights", "gnn=random:1", "--gnn-weights", "random:2"], "twice"),
    (["--weights", "gru=random:1"], "--embedding gru"),
])
def test_weights_that_name_no_family_or_twice_are_one_error_line(tiny_data, tmp_path,
                                                                 weights, needle):
    from helpers import one_error_line

    one_error_line(run("featurize", tiny_data, "--embedding", "gnn", *weights,
                       "--out-dir", tmp_path / "x"), needle)
    assert not (tmp_path / "x").exists()


@pytest.mark.slow  # trains one more model
def test_verbose_train_prints_the_cards_training_record(trained, spec_dir, tmp_path):
    frames = trained / "frames" / COLLECTIONS[0].slug
    out = ok("train", frames / "train.parquet", "--spec", spec_dir / "lgbm.toml",
             "--out", tmp_path / "m", "-v").output
    shown = json.loads(out[out.index("{"):])
    card = json.loads((tmp_path / "m" / "card.json").read_text())
    assert shown == {k: card[k] for k in ("training_data", "train_seconds", "versions")}
