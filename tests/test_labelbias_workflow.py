"""The labelbias rules: job counts of a dry run at demo and paper scale (the demo run itself is `make demo`)."""

from __future__ import annotations

from pathlib import Path

from workflow_helpers import jobs, snakemake


def test_demo_dry_run_shards_inference_and_runs_two_lora_jobs(checkout: Path) -> None:
    res = snakemake("-n", "labelbias_all", "--configfile", "config/demo.yaml", cwd=checkout)
    assert res.returncode == 0, res.stderr + res.stdout
    counts = jobs(res.stdout)
    assert counts["labelbias_infer"] == 3 * 2  # models x shards
    assert counts["labelbias_lora"] == 1  # tiny-llama in one part: k = 2, sets 0 and 1 in one job
    assert counts["labelbias_evaluate"] == 3
    assert counts["labelbias_differences"] == 3  # the prompt differences flipped, one job per model
    assert counts["labelbias_lora_differences"] == 1  # the LoRA ones, for the one fine-tuned model
    assert "results/labelbias/scores/differences/lora/tiny-llama_metrics.parquet" in res.stdout
    # the generated tasks' input templates, which the DC inputs under paper follow
    assert counts["sni_generate_input_templates"] == 1
    assert "resources/data/sni/task_info/classification_task_input_templates.csv" in res.stdout
    # Figs. 2-4 on tiny-llama (the demo's Llama-2), the appendix on tiny-gpt2, the pooled views
    for fig in ("fig2", "fig3", "fig4", "fig5", "fig6", "fig2_all_families", "fig3_all_models", "fig4_all_families"):
        assert f"results/labelbias/figures/{fig}.png" in res.stdout
    assert "results/labelbias/figures/fig7.png" not in res.stdout
    assert "results/labelbias/scores/subgroups_input.parquet" in res.stdout


def test_paper_dry_run_scales_with_models_shards_and_lora_runs(checkout: Path) -> None:
    res = snakemake("-n", "labelbias_all", cwd=checkout)
    assert res.returncode == 0, res.stderr + res.stdout
    counts = jobs(res.stdout)
    assert counts["sni_task_info"] == 1  # the filter's summaries (studies.labelbias.task_info)
    assert counts["labelbias_infer"] == 10 * 32
    assert counts["labelbias_differences"] == 10
    assert counts["labelbias_lora_differences"] == 4  # the models fine-tuned (lora.models)
    # 4 models x 16 parts, each under every (k, set): k = 0 one set, k = 4, 8, 16 three
    assert counts["labelbias_lora"] == 4 * 16
    # the paper's lineup: Figs. 2-4 Llama-2, 5-6 Mistral and Falcon, 7-8 their mitigation methods
    for fig in ("fig2", "fig3", "fig4", "fig5", "fig8", "fig2_all_families", "fig3_all_models", "fig4_all_families"):
        assert f"results/labelbias/figures/{fig}.pdf" in res.stdout
    assert "results/labelbias/figures/fig9.pdf" not in res.stdout
