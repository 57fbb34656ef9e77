"""The training-curve figures of the systems benches: held-out tau (in-graph) or headline
(cross-graph) at each checkpoint against training CPU seconds, one colour per system.
PNGs under bench/results/, for the report only.
"""

from __future__ import annotations

from pathlib import Path

# One colour per system in every curve figure (a system's learning rates share it).
SYSTEM_COLOURS = {"xlarank": "C0", "tpugraphs-gnn": "C1", "gru": "C2", "hybrid": "C3",
                  "competition-gnn": "C4", "random": "C7"}


def colour_of(name: str) -> str:
    return SYSTEM_COLOURS.get(name, "C9")


def plot_rates(ax, curve: list[dict], name: str, floor: float = 0.1) -> None:
    """One line per learning rate of an in-graph curve, in the system's colour with a
    style per rate: held-out tau against CPU s."""
    styles = ["-", "--", ":", "-."]
    for i, rate in enumerate(dict.fromkeys(p["learning_rate"] for p in curve)):
        points = [p for p in curve if p["learning_rate"] == rate]
        ax.plot([max(p.get("cpu_seconds", p.get("seconds", 0.0)), floor) for p in points],
                [p["held_tau"] for p in points], marker=".", color=colour_of(name),
                linestyle=styles[i % len(styles)], label=f"{name} lr {rate:g}")


def finish_curves(fig, axes, title: str, path: Path) -> str:
    """Log time axes, grid and legends, the title, and the figure saved at ``path``."""
    for ax in axes:
        ax.set_xscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return str(path)


def cross_curves(results: list[dict], out_dir: Path, stem: str) -> str | None:
    """bench/results/<stem>-cross-curve.png: per collection, the held-out headline at each
    epoch of seed 0's run (the first seed's) against its training CPU seconds (log axis),
    the rule's kept checkpoint starred; systems without epochs are a point per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    collections = list(dict.fromkeys(r["collection"] for r in results))
    if not collections:
        return None
    fig, axes = plt.subplots(1, len(collections), figsize=(max(6.4, 4.2 * len(collections)),
                                                          3.8), squeeze=False)
    for ax, collection in zip(axes[0], collections):
        for row in (r for r in results if r["collection"] == collection):
            curve = next(iter(row["curves"].values()), None)
            if curve:
                line, = ax.plot([max(p["cpu_seconds"], 0.1) for p in curve],
                                [p["held"] for p in curve], marker=".", label=row["system"],
                                color=colour_of(row["system"]))
                first = row["per_seed"][0]
                kept = curve[first["kept_epoch"] - 1]
                ax.scatter([max(kept["cpu_seconds"], 0.1)], [kept["held"]], marker="*",
                           s=120, color=line.get_color(), zorder=4)
            else:
                ax.scatter([max(p["train_cpu_s"], 0.1) for p in row["per_seed"]],
                           [p["metric"] for p in row["per_seed"]], label=row["system"],
                           color=colour_of(row["system"]), zorder=3)
        ax.set_title(f"{collection}", fontsize=9)
        ax.set_xlabel("training CPU seconds (1 core)")
    axes[0][0].set_ylabel("held-out headline (tau; tile 1 - slowdown@5)")
    return finish_curves(fig, axes[0], "Cross-graph: held-out headline at each epoch against "
                         "training time; star: the rule's kept checkpoint\n(for the report "
                         "only: it never steers training)", out_dir / f"{stem}-cross-curve.png")


def ingraph_curves(results: list[dict], out_dir: Path, stem: str = "systems"
                   ) -> str | None:
    """bench/results/<stem>-ingraph-curve.png (stem: the record's, so records do not
    overwrite each other's): per share, the held-out tau of each
    checkpoint of seed 0's run against its training CPU seconds (log axis), one line per
    learning rate tried; systems without checkpoints are a point per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shares = sorted({r["share"] for r in results}, reverse=True)
    if not shares:
        return None
    fig, axes = plt.subplots(1, len(shares), figsize=(max(6.4, 4.2 * len(shares)), 3.8),
                             squeeze=False, sharey=True)
    for ax, share in zip(axes[0], shares):
        for row in (r for r in results if r["share"] == share):
            curve = row["curves"].get("0") or next(iter(row["curves"].values()), None)
            if curve:
                plot_rates(ax, curve, row["system"])
            else:
                ax.scatter([max(p.get("train_cpu_s", p["train_s"]), 0.1)
                            for p in row["per_seed"]],
                           [p["tau"] for p in row["per_seed"]], label=row["system"],
                           color=colour_of(row["system"]), zorder=3)
        ax.set_title(f"unet3d, {share:.0%} measured", fontsize=9)
        ax.set_xlabel("training CPU seconds (1 core)")
    axes[0][0].set_ylabel("Kendall tau, held-out configs")
    return finish_curves(fig, axes[0], "In-graph: held-out tau at each checkpoint against "
                         "training time\n(for the report only: it never steers training)",
                         out_dir / f"{stem}-ingraph-curve.png")
