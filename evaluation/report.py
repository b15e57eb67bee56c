"""`report.md`: the four research questions answered in tables, MIN and the ideal beside every hit ratio."""

from __future__ import annotations


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def _ms(seconds: float) -> str:
    return f"{1000 * seconds:.1f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def q1_section(q1: dict) -> str:
    fractions = list(q1["capacities"])
    header = ["policy"] + [f"{100 * float(f):g}% ({q1['capacities'][f]} blocks)" for f in fractions]
    runs = q1["runs"]
    rows = []
    for policy in dict.fromkeys(r["policy"] for r in runs):
        cells = []
        for f in fractions:
            r = next(r for r in runs if r["policy"] == policy and str(r["fraction"]) == f)
            cells.append(f"{_pct(r['block_hit_ratio'])} / {_pct(r['prefix_hit_ratio'])}")
        rows.append([policy, *cells])
    rows.append(["**MIN (Belady, libCacheSim)**"]
                + [f"{_pct(q1['min'][f]['block_hit_ratio'])} / {_pct(q1['min'][f]['prefix_hit_ratio'])}"
                   for f in fractions])
    ideal = q1["ideal"]
    rows.append(["**infinite cache**"]
                + [f"{_pct(ideal['block_hit_ratio'])} / {_pct(ideal['prefix_hit_ratio'])}"] * len(fractions))
    return "\n".join([
        "## Q1 — Which prefixes deserve the small in-network pool?",
        "",
        f"Every policy replays all {q1['block_references']:,} block references ({q1['unique_blocks']:,} unique) "
        "through `policies.pool.Pool`; cells are **block-level / prefix-level** hit ratios (prefix-level counts "
        "only hits inside the request's longest leading run). Pool sizes are fractions of the unique blocks.",
        "",
        _table(header, rows),
        "",
        "![hit ratio vs pool size](hit_ratio_vs_pool_size.png)",
    ])


def headline(results: dict) -> str:
    """Best policy against LRU, MIN and the ideal at every pool size (block / prefix hit ratio)."""
    q1 = results["q1"]
    fractions = list(q1["capacities"])
    best = results["best_policy"]
    rows = []
    for policy in dict.fromkeys([best, "lru"]):
        runs = {str(r["fraction"]): r for r in q1["runs"] if r["policy"] == policy}
        if len(runs) == len(fractions):
            label = f"{policy} (best)" if policy == best else policy
            rows.append([label] + [f"{_pct(runs[f]['block_hit_ratio'])} / {_pct(runs[f]['prefix_hit_ratio'])}"
                                   for f in fractions])
    rows.append(["MIN"] + [f"{_pct(q1['min'][f]['block_hit_ratio'])} / {_pct(q1['min'][f]['prefix_hit_ratio'])}"
                           for f in fractions])
    rows.append(["infinite cache"] + [_pct(q1["ideal"]["block_hit_ratio"])] * len(fractions))
    header = ["switch pool hit ratio (block / prefix)"] + [f"{100 * float(f):g}%" for f in fractions]
    return "\n".join(["## Headline", "", _table(header, rows)])


def q2_section(q2: dict) -> str:
    header = ["cluster", "prefix hit", "HBM", "node DRAM", "switch", "remote pool", "prefilled",
              "TTFT mean ms", "p99 ms", "saved ms", "max fan-in"]
    rows = []
    for r in q2["configs"]:
        t = r["from_tier"]
        rows.append([r["config"], _pct(r["prefix_hit_ratio"]), _pct(t["NODE_HBM"]), _pct(t["NODE_DRAM"]),
                     _pct(t["SWITCH"]), _pct(t["STORAGE_DRAM"]), _pct(r["computed"]), _ms(r["ttft_mean_s"]),
                     _ms(r["ttft_p99_s"]), _ms(r["saved_mean_s"]), str(r["fan_in_max"])])
    move = q2["block_move"]
    move_rows = [[k, f"{1000 * v:.2f}"] for k, v in {**move["fetch_s"], **move["recompute_s"]}.items()]
    gap_rows = [[tier, str(g["blocks"]), f"{g['median_s']:.1f}", f"{g['p90_s']:.1f}"]
                for tier, g in q2["reuse_gap"].items()]
    return "\n".join([
        "## Q2 — When should blocks move between tiers?",
        "",
        f"Cluster replay with switch policy `{q2['policy']}` ({q2['switch_blocks']} blocks); columns give the "
        "share of all block references served by each tier inside the reused leading run. Each row removes one "
        "tier (TTFT is fetch of the reused prefix + prefill of the rest).",
        "",
        _table(header, rows),
        "",
        f"Moving one block ({move['block_bytes']:,} bytes) into HBM vs recomputing it:",
        "",
        _table(["path", "ms"], move_rows),
        "",
        "Time since a served block's previous use, by the tier that served it (how long each tier must hold a "
        "block for it to pay):",
        "",
        _table(["tier", "blocks", "median s", "p90 s"], gap_rows),
        "",
        "A block should move up a tier when it is read again sooner than the tier above can keep it; it is "
        "worth fetching from any tier whose fetch time is below its recompute time.",
        "",
        "![TTFT by tier](ttft_by_tier.png)",
        "",
        "![storage fan-in](storage_fan_in.png)",
    ])


def q3_section(q3: dict) -> str:
    header = ["switch policy", "prefix hit", "TTFT mean ms", "recycled", "later reused",
              "reuse / recycled", "recycle GB"]
    rows = [[r["config"], _pct(r["prefix_hit_ratio"]), _ms(r["ttft_mean_s"]), f"{r['recycled']:,}",
             f"{r['recycled_reused']:,}", f"{r['reuse_per_recycled']:.4f}", f"{r['recycle_bytes'] / 1e9:.1f}"]
            for r in q3["rows"]]
    return "\n".join([
        "## Q3 — What should eviction recycle instead of dropping?",
        "",
        f"Switch-pool victims are recycled into a bounded remote pool ({q3['storage_blocks']:,} blocks, LRU) or "
        "dropped, per recycling policy. 'Later reused' counts recycled blocks read again from the remote pool.",
        "",
        _table(header, rows),
    ])


def q4_section(q4: dict) -> str:
    header = ["nodes", "link Gb/s", "switch hit", "TTFT without ms", "with ms", "net benefit ms",
              "max fan-in without → with", "mean fan-in without → with", "table writes/s", "controller load", "pays off"]
    rows = [[str(r["nodes"]), f"{r['link_gbps']:g}", _pct(r["switch_hit_ratio"]), _ms(r["ttft_without_s"]),
             _ms(r["ttft_with_s"]), f"{1000 * r['net_benefit_s']:.3f}",
             f"{r['fan_in_max_without']} → {r['fan_in_max_with']}",
             f"{r['fan_in_mean_without']:.2f} → {r['fan_in_mean_with']:.2f}", f"{r['table_writes_per_s']:.0f}",
             _pct(r["controller_utilisation"]), "yes" if r["pays_off"] else "no"] for r in q4["rows"]]
    return "\n".join([
        "## Q4 — At which scale does the pool's overhead pay off?",
        "",
        f"Synthetic prefix-tree workload (Zipf system prompts, multi-turn sessions, Poisson arrivals) whose "
        f"load grows with the cluster; switch policy `{q4['policy']}`. Net benefit = mean TTFT saved by the "
        "switch pool (scaled down by the controller's load when it cannot install every admission) minus its "
        "per-request lookup overhead; it pays off when that is positive. Controller load = table writes × "
        "write time / trace time.",
        "",
        _table(header, rows),
        "",
        "![net benefit](net_benefit_vs_nodes.png)",
    ])


def render(results: dict) -> str:
    meta = results["meta"]
    lines = [
        f"# kvswitch evaluation — {meta['trace']}",
        "",
        f"{meta['requests']:,} requests, {meta['block_references']:,} block references, "
        f"{meta['unique_blocks']:,} unique blocks over {meta['duration_s']:.0f} s. Model `{meta['model']}` "
        f"({meta['block_bytes']:,} bytes per {meta['block_tokens']}-token block), GPU `{meta['gpu']}`, "
        f"{meta['nodes']} nodes, routing `{meta['routing']}`. Best policy (prefix-level, at "
        f"{100 * meta['switch_fraction']:g}%): **{results['best_policy']}**.",
        "",
        headline(results),
        "",
        q1_section(results["q1"]),
        "",
        q2_section(results["q2"]),
        "",
        q3_section(results["q3"]),
        "",
        q4_section(results["q4"]),
        "",
        f"_Generated by `python -m evaluation run` in {meta['seconds']:.0f} s on {meta.get('jobs', 1)} "
        "process(es)._",
        "",
    ]
    return "\n".join(lines)
