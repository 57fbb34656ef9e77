"""xlarank measure: a JAX program's layout configs measured on the local XLA backend.

The record it writes must read back through `xlarank import` field by field; the configs
it draws must look like real ones (FORMAT.md, "Layout configs as they really are"); a
config must be realized as the layouts it names; and a killed run must resume.
"""

from __future__ import annotations

import json
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import protowrite as pw
from xlarank.cli import app
from xlarank.data.xla import import_records, read_records
from xlarank.data.xla.messages import decode
from xlarank.data.xla.opcodes import OPCODE_IDS
from xlarank.data.xla.wire import len_field, packed_field, read_varint, varint, varint_field
from xlarank.errors import XlarankError, XlarankWarning
from xlarank.measure.configs import FREE_BASE, draw_configs, free_config, full_layout
from xlarank.measure.record import module_tuning_data, read_record_configs, sidecar_path
from xlarank.measure.trace import ConfigurableNode

runner = CliRunner()

PROGRAM = '''
import numpy as np
import jax
import jax.numpy as jnp


@jax.jit
def _head(z, w):
    return jnp.tanh(z @ w)


def block(x, k, w):
    y = jax.lax.conv_general_dilated(x, k, (1, 1), "SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
    z = jax.nn.relu(y).reshape(-1, y.shape[-1])
    return _head(z, w)


def block_inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((2, 8, 8, 4), dtype=np.float32),
            rng.standard_normal((3, 3, 4, 8), dtype=np.float32) / 6,
            rng.standard_normal((8, 16), dtype=np.float32) / 3)


def looped(x, w):
    def step(h, _):
        return jnp.tanh(h @ w), None
    return jax.lax.scan(step, x, None, length=3)[0].reshape(4, 2, 16) * 2


def looped_inputs():
    return (np.ones((8, 16), np.float32), np.eye(16, dtype=np.float32))


def with_params(params, x):
    return jnp.tanh(x @ params["w"]).reshape(4, 2, 16) + params["b"]


def with_params_inputs():
    return ({"w": np.eye(16, dtype=np.float32), "b": np.float32(1.0)},
            np.ones((8, 16), np.float32))


def fails_at_run(x):
    def lost(value):
        raise RuntimeError("device lost")
    y = jax.pure_callback(lost, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
    return (y @ x).reshape(2, 8)


def fails_at_run_inputs():
    return (np.ones((4, 4), np.float32),)


def elementwise(x):
    return jnp.sin(x) + 1


def elementwise_inputs():
    return (np.ones((4, 4), np.float32),)


def broken(x):
    raise ValueError("no such model")


def broken_inputs():
    return (np.ones(3, np.float32),)
'''


@pytest.fixture(scope="module")
def program_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("program") / "prog.py"
    path.write_text(PROGRAM)
    return path


@pytest.fixture(scope="module")
def traced(program_file):
    pytest.importorskip("jax")
    from xlarank.measure import load_program
    from xlarank.measure.trace import TracedProgram

    fn, args, name = load_program(f"{program_file}:block")
    return TracedProgram(fn, args, name)


# ---------------------------------------------------------------- the wire, written
@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 2**31, 2**63 - 1, -1, -2**63])
def test_varints_are_written_as_protobuf_writes_them_and_read_back(value):
    assert varint(value) == pw.varint(value)
    read, end = read_varint(memoryview(varint(value)), 0, len(varint(value)))
    assert end == len(varint(value)) and read == value % 2**64


def test_fields_decode_as_the_schema_reads_them():
    profile = len_field(4, varint_field(4, 12345))
    run = decode(memoryview(profile + varint_field(5, 1)), "ConfigProfile")
    assert run["profile"]["compute_time_ns"] == 12345 and run["is_default"] is True
    packed = decode(memoryview(packed_field(1, [4, 0, 3])), "TensorLayoutConfig")
    assert packed["dims"] == [4, 0, 3]
    assert varint_field(3, 0) == b"" and packed_field(1, []) == b""


# ---------------------------------------------------------------- configs
def _nodes(ranks_per_node):
    return [ConfigurableNode(k, "dot_general", tuple((3,) * r if r else None for r in ranks))
            for k, ranks in enumerate(ranks_per_node)]


def test_full_layout_puts_the_fixed_dims_first_and_the_rest_row_major():
    assert full_layout((4, 0), 5) == (4, 0, 3, 2, 1)
    assert full_layout((), 3) == (2, 1, 0)
    assert sorted(full_layout((1, 2), 4)) == [0, 1, 2, 3]


def test_drawn_configs_look_like_real_ones():
    """FORMAT.md: 55-95% of (config, tensor) pairs fix exactly two positions, 3-42% fix
    none, and each tensor takes 1.4-2.0 distinct values across a file's configs."""
    nodes = _nodes([(4, 4, 4), (2, 4), (5, 5, 2), (3, 3, 3)] * 10)
    configs = draw_configs(nodes, 400, seed=3)
    assert configs[0] == free_config(nodes)
    assert len(set(configs)) == len(configs) == 400
    drawn = configs[1:]
    lengths = np.array([[len(dims) for node in c for dims in node] for c in drawn])
    assert set(np.unique(lengths)) <= {0, 2}
    assert 0.55 <= (lengths == 2).mean() <= 0.95
    assert 0.03 <= (lengths == 0).mean() <= 0.42
    distinct = [len({c[j][t] for c in drawn}) for j, node in enumerate(nodes)
                for t in range(len(node.shapes))]
    assert max(distinct) == 2 and 1.4 <= np.mean(distinct) <= 2.0
    free_bases = np.mean([(lengths[:, s] == 0).any() for s in range(lengths.shape[1])])
    assert abs(free_bases - FREE_BASE) < 0.15


def test_drawn_configs_are_seeded_and_stop_at_the_distinct_ones_there_are():
    nodes = _nodes([(2,)])
    assert draw_configs(nodes, 50, seed=1) == draw_configs(nodes, 50, seed=1)
    assert len(draw_configs(nodes, 50, seed=1)) <= 3  # free, base and one alternative
    wide = _nodes([(3, 3)] * 6)
    assert draw_configs(wide, 30, seed=1) != draw_configs(wide, 30, seed=2)


# ---------------------------------------------------------------- the record, round trip
@pytest.mark.gnn
def test_a_written_record_imports_field_by_field(tmp_path, traced):
    nodes = traced.nodes
    configs = draw_configs(nodes, 12, seed=0)
    runtimes = [1000 + 10 * i for i in range(12)]
    runtimes[5] = None  # a config that failed
    fingerprint = 0xFEDCBA9876543210
    record = module_tuning_data(traced.hlo_module, fingerprint, traced.hlo_nodes, configs,
                                runtimes, default_index=0)
    path = tmp_path / "block.pb"
    path.write_bytes(record)
    with pytest.raises(XlarankError, match="1 of 12 runs failed"):
        read_records(path)
    graph = read_records(path, drop_failed_runs=True)[0]
    kept = [i for i in range(12) if runtimes[i] is not None]
    assert graph.name == "block"
    assert graph.arrays["node_config_ids"].tolist() == traced.hlo_nodes.tolist()
    assert graph.arrays["config_runtime"].tolist() == [runtimes[i] for i in kept]
    feat = graph.arrays["node_config_feat"]
    for row, i in enumerate(kept):
        for j, tensors in enumerate(configs[i]):
            for t in range(3):
                dims = tensors[t] if t < len(tensors) else ()
                want = list(dims) + [-1] * (6 - len(dims))
                assert feat[row, j, 6 * t:6 * t + 6].tolist() == want
    stored = read_record_configs(path)
    assert stored == (fingerprint, configs, runtimes, 0)
    opcodes = graph.arrays["node_opcode"][graph.arrays["node_config_ids"]]
    assert opcodes.tolist() == [OPCODE_IDS[o] for o in ("convolution", "reshape", "dot")]


def test_a_record_without_a_layout_run_is_refused(tmp_path):
    path = tmp_path / "tile.pb"
    path.write_bytes(pw.message([(3, pw.tile_run([2], 50, default=True))]))
    with pytest.raises(XlarankError, match="not a layout tuning record"):
        read_record_configs(path)


# ---------------------------------------------------------------- the program, traced
@pytest.mark.gnn
def test_configurable_nodes_map_to_their_hlo_instructions(traced):
    from xlarank.data.xla.encode import encode_module

    assert [n.primitive for n in traced.nodes] == ["conv_general_dilated", "reshape",
                                                   "dot_general"]
    assert traced.nodes[0].shapes == ((2, 8, 8, 8), (2, 8, 8, 4), (3, 3, 4, 8))
    assert traced.nodes[1].shapes == ((128, 8), (2, 8, 8, 8))
    encoded = encode_module(memoryview(traced.hlo_module), None)
    for node, position in zip(traced.nodes, traced.hlo_nodes):
        assert f"xlarank.node{node.index}/" in encoded.node_op_name[position]
        assert encoded.node_rank[position] == len(node.shapes[0])
    # The nested jit's product is found inside the inlined call.
    assert encoded.node_opcode[traced.hlo_nodes[2]] == OPCODE_IDS["dot"]


@pytest.mark.gnn
def test_a_config_is_compiled_with_the_layouts_it_names(traced):
    import jax

    layouts = [((1, 3, 2, 0), None, None), (None, None), ((0, 1), None, None)]
    compiled = jax.jit(traced.function(layouts)).lower(*traced.inputs).compile()
    text = compiled.as_text()
    assert "f32[2,8,8,8]{1,3,2,0}" in text
    plain = jax.jit(traced.function(None))(*traced.inputs)
    np.testing.assert_allclose(np.asarray(compiled(*traced.inputs)), np.asarray(plain),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.gnn
def test_nodes_inside_control_flow_are_left_to_the_compiler(program_file):
    pytest.importorskip("jax")
    from xlarank.measure import load_program
    from xlarank.measure.trace import TracedProgram

    fn, args, name = load_program(f"{program_file}:looped")
    traced = TracedProgram(fn, args, name)
    assert [n.primitive for n in traced.nodes] == ["reshape"]


# ---------------------------------------------------------------- measuring
SMALL = dict(configs=8, rounds=2, repeats=1, warmup=1)


@pytest.mark.gnn
def test_a_config_realizes_each_tensor_layout_it_names(traced):
    """Through `node_layouts`: the convolution's output, input and kernel each get the
    layout of its own config entry (minor-to-major, the open dims row-major after)."""
    import jax

    from xlarank.measure.configs import node_layouts

    config = (((1, 3), (1, 2), (3, 0)), ((), ()), ((), (), ()))
    layouts = node_layouts(config, traced.nodes)
    assert layouts[0] == ((1, 3, 2, 0), (1, 2, 3, 0), (3, 0, 2, 1))
    text = jax.jit(traced.function(layouts)).lower(*traced.inputs).compile().as_text()
    for shape, layout in (("f32[2,8,8,8]", "1,3,2,0"), ("f32[2,8,8,4]", "1,2,3,0"),
                          ("f32[3,3,4,8]", "3,0,2,1")):
        assert f"{shape}{{{layout}}}" in text, (shape, layout)


@pytest.mark.slow
@pytest.mark.gnn
def test_a_program_taking_a_dict_of_weights_is_measured(tmp_path, program_file):
    from xlarank.measure import Settings, load_program, measure_program

    fn, args, name = load_program(f"{program_file}:with_params")
    result = measure_program(fn, args, tmp_path / "p.pb", settings=Settings(**SMALL))
    assert all(r is not None for r in result.runtimes_ns)


@pytest.mark.gnn
def test_a_program_that_fails_to_run_leaves_no_log(tmp_path, program_file):
    from xlarank.measure import Settings, load_program, measure_program

    fn, args, name = load_program(f"{program_file}:fails_at_run")
    with pytest.raises(XlarankError, match="fails_at_run: does not"):
        measure_program(fn, args, tmp_path / "f.pb", name=name, settings=Settings(**SMALL))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.gnn
def test_measure_writes_a_record_that_imports_and_a_manifest(tmp_path, program_file):
    pytest.importorskip("jax")
    from xlarank.measure import Settings, load_program, measure_program

    fn, args, name = load_program(f"{program_file}:block")
    out = tmp_path / "rec" / "block.pb"
    result = measure_program(fn, args, out, name=name, settings=Settings(**SMALL))
    assert result.errors == {} and all(r is not None and r > 0 for r in result.runtimes_ns)
    manifest = json.loads(sidecar_path(out).read_text())
    assert manifest["configs"] == manifest["measured"] == 8
    assert manifest["machine"]["backend"] == "cpu" and manifest["machine"]["jax"]
    assert set(manifest["noise"]) >= {"repeat_tau", "noise_ns", "within_noise", "spread"}
    assert np.array(manifest["per_round_ns"]).shape == (2, 8)
    runtime = np.median(np.array(manifest["per_round_ns"], dtype=float), axis=0)
    assert np.allclose(runtime, result.runtimes_ns, atol=1)
    graphs = import_records([out], tmp_path / "imported")
    assert graphs[0].arrays["config_runtime"].tolist() == result.runtimes_ns
    assert not (out.parent / "block.pb.partial.jsonl").exists()


@pytest.mark.slow
@pytest.mark.gnn
def test_a_killed_measurement_resumes_from_its_log(tmp_path, program_file):
    pytest.importorskip("jax")
    from xlarank.measure import Settings, load_program, measure_program

    fn, args, name = load_program(f"{program_file}:block")
    out = tmp_path / "block.pb"
    timed = []

    def kill_after_five(phase, _total):
        if phase == "time":
            timed.append(1)
            if len(timed) == 5:
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        measure_program(fn, args, out, settings=Settings(**SMALL), on_step=kill_after_five)
    assert not out.exists()
    log = (tmp_path / "block.pb.partial.jsonl").read_text().splitlines()
    assert len(log) == 1 + 5
    with pytest.raises(XlarankError, match="pass --resume"):
        measure_program(fn, args, out, settings=Settings(**SMALL))
    with pytest.raises(XlarankError, match="another program, configs or settings"):
        measure_program(fn, args, out, settings=Settings(**{**SMALL, "seed": 9}),
                        resume=True)
    # A kill mid-write leaves a cut last line: it is skipped, and the next one stays whole.
    partial = tmp_path / "block.pb.partial.jsonl"
    partial.write_text(partial.read_text() + '{"round": 1, "conf')
    result = measure_program(fn, args, out, settings=Settings(**SMALL), resume=True)
    first_five = [json.loads(line) for line in log[1:]]
    for entry in first_five:
        assert result.per_round_ns[entry["round"], entry["config"]] == entry["ns"]
    assert not np.isnan(result.per_round_ns).any()


@pytest.mark.slow
@pytest.mark.gnn
def test_remeasure_checks_the_program_and_reports_agreement(tmp_path, program_file):
    pytest.importorskip("jax")
    from xlarank.measure import Settings, load_program, measure_program, remeasure

    fn, args, name = load_program(f"{program_file}:block")
    first = measure_program(fn, args, tmp_path / "a.pb", settings=Settings(**SMALL))
    again = remeasure(fn, args, tmp_path / "a.pb", tmp_path / "b.pb", count=5, seed=2,
                      settings=Settings(**SMALL))
    chosen = again.manifest["remeasure"]["configs"]
    assert chosen[0] == 0 and len(chosen) == 5
    assert again.configs == [first.configs[i] for i in chosen]
    tau = json.loads(sidecar_path(tmp_path / "b.pb").read_text())["remeasure"]
    assert -1 <= tau["tau_with_stored"] <= 1 and tau["record"] == str(tmp_path / "a.pb")
    other, other_args, _ = load_program(f"{program_file}:looped")
    with pytest.raises(XlarankError, match="measures another program"):
        remeasure(other, other_args, tmp_path / "a.pb", tmp_path / "c.pb", count=3)


def test_noise_ceiling_reads_agreement_between_independent_rounds():
    from xlarank.measure import noise_ceiling

    steady = np.tile(np.arange(1.0, 11.0), (4, 1))
    same = noise_ceiling(steady)
    assert same["repeat_tau"] == pytest.approx(1.0) and same["noise_ns"] == 0.0
    assert same["within_noise"] == 0.1 and same["spread"] == 10.0
    flipped = steady.copy()
    flipped[1::2] = flipped[1::2, ::-1]
    assert noise_ceiling(flipped)["repeat_tau"] == pytest.approx(-1.0)
    one_round = noise_ceiling(steady[:1])
    assert one_round["repeat_tau"] is None and one_round["noise_ns"] is None
    gap = steady.copy()
    gap[:, 3] = np.nan  # a config never timed is left out
    assert noise_ceiling(gap)["timed_configs"] == 9


# ---------------------------------------------------------------- the command
@pytest.mark.parametrize("spec, message", [
    ("{dir}/missing.py:block", "no such Python file"),
    ("{dir}/prog.py", "give the program as PATH.py:FUNCTION"),
    ("{dir}/prog.py:nope", "has no function 'nope'"),
    ("{dir}/prog.py:broken", "does not trace with the given inputs (ValueError: no such"),
    ("{dir}/prog.py:elementwise", "no configurable node"),
    ("{dir}/syntax.py:f", "does not load (SyntaxError"),
    ("{dir}/shapes.py:f", "does not trace with the given inputs (TypeError"),
])
@pytest.mark.gnn
def test_bad_programs_give_one_error_line(tmp_path, program_file, spec, message):
    pytest.importorskip("jax")
    folder = program_file.parent
    (folder / "syntax.py").write_text("def f(:\n")
    (folder / "shapes.py").write_text(textwrap.dedent("""
        import numpy as np
        def f(x, w):
            return x @ w
        def f_inputs():
            return (np.ones((3, 4), np.float32), np.ones((5, 6), np.float32))
    """))
    result = runner.invoke(app, ["measure", spec.format(dir=folder), "--out",
                                 str(tmp_path / "out.pb")])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("target", ["program", "record", "candidates"])
def test_measure_never_writes_over_what_it_reads(tmp_path, target):
    program = tmp_path / "prog.py"
    program.write_text(PROGRAM)
    record = tmp_path / "old.pb"
    record.write_bytes(b"x")
    cands = tmp_path / "c.npz"
    cands.write_bytes(b"y")
    out = {"program": program, "record": record, "candidates": cands}[target]
    extra = {"program": [], "record": ["--remeasure", str(record)],
             "candidates": ["--configs-of", str(cands), "--indices", str(record)]}[target]
    before = out.read_bytes()
    result = runner.invoke(app, ["measure", f"{program}:block", "--out", str(out), *extra])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(out) in lines[0]
    assert out.read_bytes() == before


def test_corpus_never_writes_its_manifest_over_the_programs_list(tmp_path):
    listed = tmp_path / "manifest.json"
    listed.write_text('[[program]]\nname = "a"\nfamily = "f"\nfunction = "a.py:a"\n')
    before = listed.read_text()
    result = runner.invoke(app, ["corpus", str(listed), "--out-dir", str(tmp_path)])
    assert result.exit_code == 2 and result.stderr.startswith("error: "), result.output
    assert listed.read_text() == before


@pytest.mark.slow
@pytest.mark.gnn
def test_the_command_measures_and_says_how_noisy(tmp_path, program_file):
    pytest.importorskip("jax")
    out = tmp_path / "block.pb"
    result = runner.invoke(app, ["measure", f"{program_file}:block", "--out", str(out),
                                 "--configs", "6", "--rounds", "2", "--repeats", "1"])
    assert result.exit_code == 0, result.output
    assert "6 of 6 configs measured (0 failed)" in result.stdout
    assert "repeat tau" in result.stdout and out.is_file() and sidecar_path(out).is_file()


# ---------------------------------------------------------------- the corpus
def test_a_programs_list_is_checked(tmp_path):
    from xlarank.measure.corpus import read_programs

    listed = tmp_path / "programs.toml"
    listed.write_text('[[program]]\nname = "a"\nfamily = "mlp"\nfunction = "p/a.py:a"\n')
    (program,) = read_programs(listed)
    assert program.function == f"{tmp_path}/p/a.py:a"
    listed.write_text('[[program]]\nname = "a b"\nfamily = "mlp"\nfunction = "a.py:a"\n')
    with pytest.raises(XlarankError, match="use letters"):
        read_programs(listed)
    listed.write_text('[[program]]\nname = "a"\nfamily = "mlp"\n')
    with pytest.raises(XlarankError, match="needs name, family and function"):
        read_programs(listed)
    listed.write_text("x = 1\n")
    with pytest.raises(XlarankError, match=r"lists no \[\[program\]\]"):
        read_programs(listed)


@pytest.mark.slow
@pytest.mark.gnn
def test_a_corpus_keeps_the_programs_that_repeat_and_lists_the_others(tmp_path,
                                                                      program_file):
    pytest.importorskip("jax")
    from xlarank.measure import Settings
    from xlarank.measure.corpus import build_corpus, read_programs

    listed = program_file.parent / "programs.toml"
    listed.write_text('[[program]]\nname = "block"\nfamily = "cnn"\n'
                      'function = "prog.py:block"\n')
    programs = read_programs(listed)
    manifest = build_corpus(programs, tmp_path / "c", settings=Settings(**SMALL),
                            min_repeat_tau=1.5, retry_rounds=3)
    assert manifest["programs"] == [] and manifest["left_out"][0]["name"] == "block"
    assert manifest["left_out"][0]["rounds"] == 3
    assert (tmp_path / "c/left_out/block.pb").is_file()
    again = build_corpus(programs, tmp_path / "c", settings=Settings(**SMALL),
                         min_repeat_tau=1.5)
    assert again["left_out"] == manifest["left_out"]  # kept, not measured again
    listed_only = build_corpus(programs, tmp_path / "d", measure=False)
    assert listed_only["not_measured"] == ["block"] and listed_only["programs"] == []
    assert not (tmp_path / "d/records").exists()
    kept = build_corpus(programs, tmp_path / "d", settings=Settings(**SMALL),
                        min_repeat_tau=-1.0)
    assert kept["programs"][0]["record"] == "records/block.pb"
    assert kept["programs"][0]["configs"] == 8 and kept["families"] == ["cnn"]


# ---------------------------------------------------------------- around it
def test_training_on_too_few_graphs_warns():
    from xlarank.rank.train import MIN_TRAINING_GRAPHS, warn_few_graphs

    def check(graphs: int, flat: int = 0) -> None:
        runtime = np.r_[np.tile([1.0, 2.0], graphs), np.ones(2 * flat)]
        warn_few_graphs(runtime, np.repeat(np.arange(graphs + flat), 2), "frame.parquet")

    with pytest.warns(XlarankWarning, match=r"frame.parquet: .* fit on 2 graph.s., fewer "
                                            "than 5"):
        check(2)
    with pytest.warns(XlarankWarning, match="fit on 4 graph"):
        check(4, flat=3)  # graphs with one runtime teach no ranking
    with warnings.catch_warnings():
        warnings.simplefilter("error", XlarankWarning)
        check(MIN_TRAINING_GRAPHS)


def test_a_module_xla_named_for_its_entry_is_named_after_its_record(tmp_path):
    module = pw.module("main__.10904", [pw.computation(1, "main__.10904", [
        pw.instruction(1, "parameter"), pw.instruction(2, "dot", [1, 1])], 2)], 1)
    path = tmp_path / "resnet_block.pb"
    path.write_bytes(pw.message([(1, module), (3, pw.layout_run([[[1, 0]]], 10, True)),
                                 (4, 1)]))
    (graph,) = read_records(path)
    assert graph.name == "resnet_block"


# ---------------------------------------------------------------- candidates, the loop
@pytest.mark.slow
@pytest.mark.gnn
def test_candidates_round_trip_through_their_file(tmp_path, traced, program_file,
                                                  monkeypatch):
    from xlarank.data.graph import load_graph
    from xlarank.measure import candidate_configs, load_program, write_candidates

    fn, args, name = load_program(f"{program_file}:block")
    written = write_candidates(fn, args, tmp_path / "c.npz", count=20, seed=4)
    graph = load_graph(tmp_path / "c.npz")
    assert graph.n_configs == written == 20 and not graph.config_runtime.any()
    drawn = draw_configs(traced.nodes, 20, seed=4)
    assert candidate_configs(traced, tmp_path / "c.npz", range(20)) == drawn
    with pytest.raises(XlarankError, match="is not one of"):
        candidate_configs(traced, tmp_path / "c.npz", [20])
    import xlarank.measure as measure

    # The bound is the HLO import's (1 GiB of float32 configs); a smaller one here.
    monkeypatch.setattr(measure, "MAX_CANDIDATE_BYTES", 1000)
    with pytest.raises(XlarankError, match="would take 0.0 GiB; give at most 4"):
        write_candidates(fn, args, tmp_path / "big.npz", count=20)
    assert not (tmp_path / "big.npz").exists()
    other, other_args, _ = load_program(f"{program_file}:looped")
    write_candidates(other, other_args, tmp_path / "o.npz", count=4)
    with pytest.raises(XlarankError, match="another program's configs"):
        candidate_configs(traced, tmp_path / "o.npz", [1])


DOCS = Path(__file__).resolve().parents[1] / "docs" / "xla.md"
CORPUS = Path(__file__).resolve().parents[1] / "corpus"


@pytest.mark.gnn
@pytest.mark.slow
def test_the_tuning_walk_through_runs_as_written(tmp_path):
    """docs/xla.md's loop from a JAX function to tuned configs, as the page shows it."""
    import os
    import re
    import subprocess
    import sys

    pytest.importorskip("jax")
    text = DOCS.read_text().split("### From your JAX function to tuned configs", 1)[1]
    python_block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    shell_block = re.search(r"```sh\n(.*?)```", text, re.S).group(1)
    (tmp_path / "mine.py").write_text(python_block)
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "XLARANK": str(CORPUS.parent), "JAX_PLATFORMS": "cpu",
           "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("XLA_FLAGS", None)
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", shell_block], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    ranked = (tmp_path / "ranked.csv").read_text().splitlines()
    assert ranked[0].startswith("rank,config_index,score,measured")
    assert sorted(int(line.split(",")[1]) for line in ranked[1:]) == list(range(64))
    measured = (tmp_path / "measured.csv").read_text().splitlines()[1:]
    # Three rounds of six suggestions, each with the compiler's own config 0 beside them.
    assert 18 <= len(measured) <= 21
    assert len({line.split(",")[0] for line in measured}) >= 18
    for k in (1, 2, 3):
        assert (tmp_path / f"round{k}.pb").is_file()
