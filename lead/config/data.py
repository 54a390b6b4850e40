"""The section of the problems: ``curate`` (where problems come from, how they are cleaned), with its
``curate.sources`` entries and the proxy task's ``curate.proxy``."""

from __future__ import annotations

from pydantic import Field, model_validator

from lead.config.base import Section, Seed, _rule


class ProxyParams(Section):
    """``curate.proxy``: the synthetic arithmetic-chain task (see ``lead.core.proxy``)."""

    train_problems: int = Field(
        1200,
        ge=1,
        le=1_000_000,
        description="distinct training problems drawn for a 'proxy' source (level 1 holds only ~165: the "
        "other levels fill its share)",
    )
    test_per_level: int = Field(
        50, ge=1, le=100_000, description="test-split problems per level (the 'proxy' evaluation benchmark)"
    )
    min_ops: int = Field(1, ge=1, le=20, description="fewest operations in a chain: the easiest level")
    max_ops: int = Field(6, ge=1, le=20, description="most operations in a chain: the hardest level")
    max_value: int = Field(
        99, ge=9, le=10_000, description="every start and running value stays in [0, max_value]"
    )

    @model_validator(mode="after")
    def _levels(self) -> ProxyParams:
        if self.min_ops > self.max_ops:
            raise _rule("min_ops", self.min_ops, f"must be <= max_ops ({self.max_ops})")
        return self


class SourceSpec(Section):
    """One entry of ``curate.sources``: where problems come from, and how many of them to take."""

    name: str = Field(
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="label of this source's problems (the source column, the curation report); unique",
    )
    path: str = Field(
        min_length=1,
        description="proxy (generated), a shipped file under paths.raw by name (math_train, grpo_lead_stage23, "
        "grpo_lead_combined27, deepscaler_aime, deepscaler_math), a local .jsonl/.json/.parquet file or dataset "
        "folder, or a Hugging Face dataset id (a download needs HF_DATASETS_OFFLINE=0)",
    )
    weight: float = Field(
        1.0,
        gt=0.0,
        le=1e6,
        description="this source's share of curate.max_train_problems (needs it set), relative to the other "
        "sources' weights",
    )
    max_problems: int | None = Field(
        None,
        ge=1,
        le=100_000_000,
        description="most problems kept from this source after filtering; null = all",
    )
    split: str = Field("train", min_length=1, description="hub datasets: the split to load")
    config: str | None = Field(None, min_length=1, description="hub datasets: the configuration name")


class CurateParams(Section):
    """``curate``: which problems the pipeline trains and evaluates on, and how they are cleaned.

    ``lead.core.curation`` documents each step (answer normalisation, gradable-gold check, prompt length, exact and
    near-duplicate removal, decontamination against the evaluation benchmarks, mixing).
    """

    seed: Seed = Field(
        0, description="seed of the proxy problems drawn and of each source's sample when it is cut down"
    )
    sources: list[SourceSpec] = Field(
        default_factory=lambda: [SourceSpec(name="proxy", path="proxy")],
        min_length=1,
        description="where problems come from, in priority order (the first copy of a duplicate wins); "
        "recipes/curate-real.yaml curates the shipped real datasets",
    )
    max_train_problems: int | None = Field(
        None,
        ge=1,
        le=100_000_000,
        description="total training pool, shared out by source weight; null = keep every problem that passes",
    )
    max_prompt_tokens: int = Field(
        1024,
        ge=8,
        le=1_000_000,
        description="longest problem + prompt suffix kept, in tokens of model.base's tokenizer with its chat "
        "template (else estimated from characters); longer ones are quarantined",
    )
    near_duplicate_jaccard: float = Field(
        0.9,
        gt=0.0,
        le=1.0,
        description="word 5-gram Jaccard similarity at which two problems with the same answer are "
        "near-duplicates",
    )
    decontam_ngram: int = Field(
        8, ge=3, le=50, description="length in words of the n-grams shared with the evaluation benchmarks"
    )
    decontam_coverage: float = Field(
        0.5,
        gt=0.0,
        le=1.0,
        description="contaminated when shared n-grams cover this share of a benchmark problem's words and the "
        "answers are equal",
    )
    decontam_coverage_any_answer: float = Field(
        0.8,
        gt=0.0,
        le=1.0,
        description="contaminated when shared n-grams cover this share, whatever the answer",
    )
    proxy: ProxyParams = Field(
        ProxyParams(),
        description="the proxy task's arithmetic chains: training problems and test split (the warm-start "
        "traces use its levels and values too)",
    )

    @model_validator(mode="after")
    def _sources(self) -> CurateParams:
        if self.decontam_coverage > self.decontam_coverage_any_answer:
            raise _rule(
                "decontam_coverage",
                self.decontam_coverage,
                f"must be <= decontam_coverage_any_answer ({self.decontam_coverage_any_answer})",
            )
        names = [s.name for s in self.sources]
        for name in names:
            if names.count(name) > 1:
                raise _rule("sources", name, "source names must be unique")
        if self.max_train_problems is None:
            for s in self.sources:
                if s.weight != 1.0:
                    raise _rule(
                        "sources",
                        f"{s.name}.weight={s.weight}",
                        "weights only share out curate.max_train_problems: set it, or drop the weight",
                    )
        return self
