"""Plots of a results file: one PNG per group of figures, and one of the headline ratios.

Drawn from the JSON alone (``gpuedu bench --plot-only FILE`` redraws them), with matplotlib's Agg
backend so no display is needed.
"""
import os


def draw(results, folder, stem):
    """Write ``<stem>-<group>.png`` for each group with a measured figure and ``<stem>-ratios.png``.

    Returns the list of paths written.
    """
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    os.makedirs(folder, exist_ok=True)
    machine = results["machine"]
    title_tail = f"{machine['device_name']} ({machine['backend']}), {results['date'][:10]}, {results['mode']}"
    measured = [f for f in results["figures"] if f["status"] == "ok"]
    baseline_names = {b for f in results["figures"] for b in f["baselines"]}
    paths = []

    groups = []
    for f in measured:
        if f["group"] not in groups:
            groups.append(f["group"])
    for group in groups:
        members = [f for f in measured if f["group"] == group]
        # One panel per unit: GB/s and GFLOP/s do not share an axis.
        units = []
        for f in members:
            if f["unit"] not in units:
                units.append(f["unit"])
        fig, axes = plt.subplots(len(units), 1, squeeze=False,
                                 figsize=(8, 1.2 + 0.42 * len(members) + 0.6 * len(units)))
        for ax, unit in zip(axes[:, 0], units):
            rows = [f for f in members if f["unit"] == unit]
            names = [f["name"] for f in rows]
            medians = [f["median"] for f in rows]
            low = [f["median"] - f["spread"]["q1"] for f in rows]
            high = [f["spread"]["q3"] - f["median"] for f in rows]
            colors = ["0.6" if f["name"] in baseline_names else "tab:blue" for f in rows]
            y = range(len(rows))
            ax.barh(y, medians, xerr=[low, high], color=colors, capsize=3)
            ax.set_yticks(list(y))
            ax.set_yticklabels(names)
            ax.invert_yaxis()
            label = f"{unit} (median, bars: interquartile range; grey: a baseline)"
            if max(medians) > 50 * min(medians):
                # Ladders span orders of magnitude (naive vs tuned, emulator vs NumPy).
                ax.set_xscale("log")
                label += "; log scale"
            ax.set_xlabel(label)
        axes[0, 0].set_title(f"{group}: {title_tail}", fontsize=9)
        fig.tight_layout()
        path = os.path.join(folder, f"{stem}-{group}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)

    with_ratio = [f for f in measured if f.get("ratio") is not None]
    if with_ratio:
        fig, ax = plt.subplots(figsize=(8, 1.4 + 0.36 * len(with_ratio)))
        y = range(len(with_ratio))
        ax.barh(y, [f["ratio"] for f in with_ratio], color="tab:green")
        ax.set_yticks(list(y))
        ax.set_yticklabels([f"{f['name']} / {f['baselines'][0]}" for f in with_ratio], fontsize=8)
        ax.invert_yaxis()
        ax.axvline(1.0, color="k", lw=0.8)
        # Each target's goal on the row of the figure it judges (when it judges that headline ratio).
        rows = {f["name"]: i for i, f in enumerate(with_ratio)}
        marked = False
        for t in results.get("targets", []):
            i = rows.get(t["figure"])
            if (t["metric"] == "ratio" and t["status"] != "not applicable" and i is not None
                    and with_ratio[i]["baselines"][0] == t["baseline"]):
                ax.plot([t["goal"]], [i], marker="|", linestyle="none", color="tab:red", markersize=18,
                        mew=2, label=None if marked else "target")
                marked = True
        if marked:
            ax.legend(loc="lower right", fontsize=8)
        ax.set_xscale("log")
        ax.set_xlabel("ratio of medians (figure / its headline baseline; log scale)")
        ax.set_title(f"ratios: {title_tail}", fontsize=9)
        fig.tight_layout()
        path = os.path.join(folder, f"{stem}-ratios.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths
