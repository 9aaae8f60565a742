"""Draw figures 1-4, 5, 10, 12 and the appendix figures (PNG and PDF)."""

from unsure.forkserver import hand_off

hand_off()

from pathlib import Path

import pandas as pd

from unsure.logs import logged
from unsure.nextword import plots
from unsure.nextword.data import read_samples
from unsure.nextword.distributions import restrict
from unsure.nextword.tables import fold_tvds, pick_example_positions, tvd_differences

with logged(snakemake.log[0]):
    i, p = snakemake.input, snakemake.params
    human, positions, splits = (pd.read_parquet(x) for x in (i.human, i.positions, i.splits))
    model = read_samples(i.model, known=human)
    losses = pd.concat([pd.read_parquet(x) for x in i.losses], ignore_index=True) if i.losses else pd.DataFrame()
    folds = [
        fold_tvds({"base": read_samples(b), "fine-tuned": read_samples(t)}, human, splits, fold=k)
        for k, (b, t) in enumerate(zip(i.base, i.tuned, strict=True))
    ]
    tvds, hardness = pd.read_parquet(i.tvd), pd.read_parquet(i.hardness)
    figures = {
        "fig1": plots.fig1_top_words(
            human, model, positions, pick_example_positions(restrict(human, model)), p.system, seed=p.seed
        ),
        "fig2": plots.fig2_tvd_kde(tvds, p.systems, protocol=p.protocol),
        "fig3": plots.fig3_ard(pd.read_parquet(i.ard)),
        "fig4": plots.fig4_groups(pd.read_parquet(i.groups), protocol=p.protocol),
        "fig5": plots.fig5_biased_tvd(pd.read_parquet(i.biased_tvd)),
        "fig10": plots.fig10_pos(hardness),
        "fig12": plots.fig12_tvd_differences(tvd_differences(tvds, p.systems)),
        "appB_predictors": plots.app_predictors(hardness, seed=p.seed),
        "appC_sample_size": plots.app_sample_size(pd.read_parquet(i.sample_size), seed=p.seed),
        "appD_tokens": plots.app_tokens(pd.read_parquet(i.tokens)),
        "appE_improvement": plots.app_improvement(pd.read_parquet(i.improvement), seed=p.seed),
        "appF_finetune": plots.app_finetune(
            losses, pd.concat(folds, ignore_index=True) if folds else pd.DataFrame(), seed=p.seed
        ),
    }
    plots.write_figures(figures, Path(snakemake.output[0]).parent)
