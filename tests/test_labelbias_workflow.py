"""The labelbias rules: job counts of a dry run at demo and paper scale (the demo run itself is `make demo`)."""

from __future__ import annotations

from pathlib import Path

from workflow_helpers import jobs, snakemake


def test_demo_dry_run_shards_inference_and_runs_one_lora_job(checkout: Path) -> None:
    res = snakemake("-n", "labelbias_all", "--configfile", "config/demo.yaml", cwd=checkout)
    assert res.returncode == 0, res.stderr + res.stdout
    counts = jobs(res.stdout)
    assert counts["labelbias_infer"] == 2 * 2  # models x shards
    assert counts["labelbias_lora"] == 1
    assert counts["labelbias_evaluate"] == 2
    assert "results/labelbias/figures/fig5.png" in res.stdout
    assert "results/labelbias/scores/subgroups_input.parquet" in res.stdout


def test_paper_dry_run_scales_with_models_shards_and_lora_runs(checkout: Path) -> None:
    res = snakemake("-n", "labelbias_all", cwd=checkout)
    assert res.returncode == 0, res.stderr + res.stdout
    counts = jobs(res.stdout)
    assert counts["sni_task_info"] == 1  # the filter's summaries (studies.labelbias.task_info)
    assert counts["labelbias_infer"] == 10 * 32
    # 4 models x (k=0: one set; k=4, 8, 16: three sets) x 16 parts
    assert counts["labelbias_lora"] == 4 * 10 * 16
    for fig in ("fig2", "fig3", "fig4", "fig5", "fig9"):  # five (family, size) pairs: fig5..fig9
        assert f"results/labelbias/figures/{fig}.pdf" in res.stdout
