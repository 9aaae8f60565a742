"""Every figure of the study: fig2-fig6 and figA1-figA9."""

from unsure.forkserver import hand_off

hand_off()

from pathlib import Path

import pandas as pd

from unsure.logs import logged
from unsure.report import save_figure
from unsure.riskscores import plots
from unsure.riskscores.dictionary import read_dictionary
from unsure.riskscores.metrics import subgroup_gap
from unsure.riskscores.text import value_text

with logged(snakemake.log[0]) as log:
    inp, p = snakemake.input, snakemake.params
    out = Path(snakemake.output[0]).parent
    metrics = pd.read_parquet(inp.metrics)
    scores = pd.read_parquet(inp.scores)
    if unparsed := int(scores["p_hat"].isna().sum()):  # counted per run in the metrics table (n_unparsed)
        log.warning("%d NaN scores (unparsed answers) left out of the figures", unparsed)
        scores = scores[scores["p_hat"].notna()]
    instruct = dict(p.models)
    llms = list(instruct)
    task = p.tasks[0]
    dictionary = read_dictionary(inp.dictionary)
    rows = pd.read_parquet(inp.rows[0])
    groups = rows.set_index("row_id")[p.subgroup_column].map(lambda v: value_text(p.subgroup_column, v, dictionary))
    ev = scores[(scores["task"] == task) & (scores["split"] == "eval") & scores["model"].isin(llms)]
    gaps = {
        (m, kind): subgroup_gap(g["label"], g["p_hat"], g["row_id"].map(groups))
        for (m, kind), g in ev.groupby(["model", "prompting"])
    }
    log.info("mean score gap vs the largest %s group at equal true probability: %s", p.subgroup_column, gaps)
    names = plots.subgroup_names(groups, ev["row_id"])
    offenders = plots.worst_offenders(gaps, names) or llms[:2]
    log.info("figure 6 shows %s (largest gap between %s); figure A4 shows %s", offenders, names, p.api_model)
    importance = pd.concat([pd.read_parquet(path) for path in inp.importance]) if inp.importance else pd.DataFrame()
    evidence = pd.concat([pd.read_parquet(path) for path in inp.evidence]) if inp.evidence else pd.DataFrame()

    def subgroups(models: list[str], **kw: object):
        return plots.subgroup_calibration(scores, groups, task, p.subgroup_column, models, instruct, gaps=gaps, **kw)

    save_figure(plots.fig2(metrics, instruct, seed=p.seed), out / "fig2")
    save_figure(plots.fig3(scores, instruct, task), out / "fig3")
    save_figure(plots.fig4(metrics, task, instruct, seed=p.seed), out / "fig4")
    save_figure(plots.fig5(scores, instruct, task), out / "fig5")
    save_figure(subgroups(offenders, title=f"Largest {p.subgroup_column} score gaps"), out / "fig6")
    save_figure(
        plots.change_heatmap(metrics, "ece", llms, "ECE change, numeric vs multiple-choice", instruct), out / "figA1"
    )
    save_figure(
        plots.change_heatmap(metrics, "auc", llms, "AUC change, numeric vs multiple-choice", instruct), out / "figA2"
    )
    save_figure(plots.figA3(scores, task, instruct), out / "figA3")
    which = "a web-API model" if p.api_model_is_api else "no web-API model configured: the first model"
    save_figure(subgroups([p.api_model], title=f"{p.api_model} ({which})"), out / "figA4")
    save_figure(subgroups(llms, intervals=True, title="95% Wilson intervals per bin"), out / "figA5")
    save_figure(plots.figA6(scores, groups, task, instruct, seed=p.seed), out / "figA6")
    save_figure(plots.figA7(evidence, instruct), out / "figA7")
    save_figure(
        plots.evidence_figure(evidence, ["auc", "ece"], "Increasing evidence", instruct, seed=p.seed), out / "figA8"
    )
    save_figure(plots.figA9(importance, instruct, seed=p.seed), out / "figA9")
