"""The report's figures as PNGs (matplotlib, headless)."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def hit_ratio_vs_size(q1: dict, out: Path) -> Path:
    """Block- and prefix-level hit ratio per policy against pool size, MIN and the ideal beside."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    fractions = sorted({r["fraction"] for r in q1["runs"]})
    xs = [100 * f for f in fractions]
    for ax, level in zip(axes, ("block", "prefix"), strict=True):
        for policy in dict.fromkeys(r["policy"] for r in q1["runs"]):
            ys = [next(r for r in q1["runs"] if r["policy"] == policy and r["fraction"] == f)[f"{level}_hit_ratio"]
                  for f in fractions]
            ax.plot(xs, ys, marker="o", label=policy)
        ax.plot(xs, [q1["min"][str(f)][f"{level}_hit_ratio"] for f in fractions], "k--", marker="s",
                label="MIN (Belady)")
        ax.axhline(q1["ideal"][f"{level}_hit_ratio"], color="grey", linestyle=":", label="infinite cache")
        ax.set_xscale("log")
        ax.set_xlabel("switch pool size (% of unique blocks)")
        ax.set_title(f"{level}-level hit ratio")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("hit ratio")
    axes[1].legend(fontsize=8)
    return _save(fig, out)


def _rolling(series: list[tuple[float, int]], window_s: float, step_s: float) -> tuple[list[float], list[float]]:
    """Mean per `step_s` window of a series, over consecutive `window_s` bins (windows with no reads count 0)."""
    if not series:
        return [], []
    values = dict(series)
    starts = np.array(list(values))
    amounts = np.array(list(values.values()), dtype=float)
    end = starts.max()
    xs = np.arange(0.0, end + step_s, window_s)
    sums = [amounts[(starts >= x) & (starts < x + window_s)].sum() for x in xs]
    return list(xs), [total / (window_s / step_s) for total in sums]


def fan_in_over_time(q2: dict, out: Path, window_s: float = 60.0) -> Path:
    """Readers and bytes at the busiest storage NIC over time, with and without the switch pool."""
    step_s = q2.get("incast_window_s", 1.0)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    styles = {"without switch pool": ("tab:orange", "-"), "all tiers": ("tab:blue", "--")}
    for row in q2["configs"]:
        if row["config"] not in styles:
            continue
        color, line = styles[row["config"]]
        label = "with switch pool" if row["config"] == "all tiers" else "without switch pool"
        xs, ys = _rolling(row["fan_in_series"], window_s, step_s)
        top.plot(xs, ys, color=color, linestyle=line, label=label)
        xs, ys = _rolling(row["storage_load_series"], window_s, step_s)
        bottom.plot(xs, [y / 1e9 for y in ys], color=color, linestyle=line, label=label)
    top.set_ylabel(f"concurrent readers\n(per {step_s:g} s window)")
    top.set_title(f"storage-node fan-in and load (N-to-1 incast), mean over {window_s:g} s")
    bottom.set_ylabel(f"GB sent per {step_s:g} s window")
    bottom.set_xlabel("trace time (s)")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
        ax.legend()
    return _save(fig, out)


def ttft_saved(q2: dict, out: Path) -> Path:
    """Mean TTFT and the share saved against full prefill, for the cluster with each tier removed."""
    rows = q2["configs"]
    names = [r["config"] for r in rows]
    fig, ax = plt.subplots(figsize=(9, 4))
    ttft = [1000 * r["ttft_mean_s"] for r in rows]
    saved = [1000 * r["saved_mean_s"] for r in rows]
    ax.barh(names, ttft, label="mean TTFT")
    ax.barh(names, saved, left=ttft, alpha=0.5, label="saved vs. full prefill")
    ax.set_xlabel("milliseconds per request")
    ax.set_title("TTFT with and without each tier")
    ax.legend()
    ax.invert_yaxis()
    return _save(fig, out)


def net_benefit(q4: dict, out: Path) -> Path:
    """Question 4: TTFT saved by the switch pool minus its overhead, against cluster size, per link speed."""
    fig, ax = plt.subplots(figsize=(8, 4))
    for gbps in sorted({r["link_gbps"] for r in q4["rows"]}):
        rows = [r for r in q4["rows"] if r["link_gbps"] == gbps]
        ax.plot([r["nodes"] for r in rows], [1000 * r["net_benefit_s"] for r in rows], marker="o",
                label=f"{gbps:g} Gb/s links")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("inference nodes (synthetic load grows with them)")
    ax.set_ylabel("net TTFT benefit per request (ms)")
    ax.set_title("where the switch pool pays off")
    ax.legend()
    ax.grid(alpha=0.3)
    return _save(fig, out)


def write_all(results: dict, out_dir: Path) -> list[Path]:
    studies = results.get("studies")
    extra = [lookahead(studies, out_dir / "lookahead.png"), calibration(studies, out_dir / "calibration.png"),
             boundary(studies, out_dir / "boundary.png")] if studies else []
    return [
        *extra,
        hit_ratio_vs_size(results["q1"], out_dir / "hit_ratio_vs_pool_size.png"),
        fan_in_over_time(results["q2"], out_dir / "storage_fan_in.png"),
        ttft_saved(results["q2"], out_dir / "ttft_by_tier.png"),
        net_benefit(results["q4"], out_dir / "net_benefit_vs_nodes.png"),
    ]


def lookahead(studies: dict, out: Path) -> Path:
    """Hit ratio against the queue lookahead W per trace, normalised to MIN."""
    fig, ax = plt.subplots(figsize=(8, 4))
    for name, t in studies["traces"].items():
        la = t["lookahead"]
        ws = [float(w) for w in la["hits"]]
        top = la["min"]["block_hit_ratio"] or 1.0
        ax.plot([w + 0.5 for w in ws], [v["block_hit_ratio"] / top for v in la["hits"].values()], marker="o",
                label=name)
    ax.axhline(1.0, color="black", linestyle="--", label="MIN")
    ax.set_xscale("log")
    ax.set_xlabel("lookahead W + 0.5 s (queue seen ahead)")
    ax.set_ylabel("hit ratio / MIN")
    ax.set_title("what the request queue is worth")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, out)


def calibration(studies: dict, out: Path) -> Path:
    """LRU hit ratio over capacity in tokens, against the infinite cache, with Mooncake's 3M and 50M marks."""
    fig, ax = plt.subplots(figsize=(8, 4))
    for name, c in studies["calibration"].items():
        line, = ax.plot(c["tokens"], c["lru"], marker="o", label=f"{name} LRU")
        ax.axhline(c["ideal"], color=line.get_color(), linestyle=":", label=f"{name} maximum")
    for mark in (3e6, 50e6):
        ax.axvline(mark, color="grey", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("cache capacity (tokens)")
    ax.set_ylabel("block hit ratio")
    ax.set_title("calibration against Mooncake FAST'25 (3M / 50M tokens)")
    ax.grid(alpha=0.3)
    if studies["calibration"]:
        ax.legend(fontsize=7)
    return _save(fig, out)


def boundary(studies: dict, out: Path) -> Path:
    """Heatmaps of the net TTFT benefit (ms per reader) on three planes of the Q4 boundary."""
    planes = studies["boundary"]["planes"]
    fig, axes = plt.subplots(1, len(planes), figsize=(6 * len(planes), 4.8))
    for ax, (name, plane) in zip(np.atleast_1d(axes), planes.items(), strict=True):
        values = np.array([[c["net_ms"] for c in row] for row in plane["cells"]])
        shown = np.sign(values) * np.log10(1 + np.abs(values))
        limit = max(1e-9, float(np.abs(shown).max()))
        image = ax.imshow(shown, cmap="RdYlGn", vmin=-limit, vmax=limit, aspect="auto")
        ax.set_xticks(range(len(plane["x"])), plane["x"], rotation=30, ha="right", fontsize=7)
        ax.set_yticks(range(len(plane["y"])), plane["y"], fontsize=7)
        x_name, y_name = name.split(" x ")
        ax.set_xlabel(y_name)
        ax.set_ylabel(x_name)
        for (i, j), v in np.ndenumerate(values):
            ax.text(j, i, f"{v:,.0f}", ha="center", va="center", fontsize=6)
        ax.set_title(f"net benefit ms: {name}", fontsize=9)
        fig.colorbar(image, ax=ax, label="sign × log10(1 + |ms|)")
    return _save(fig, out)
