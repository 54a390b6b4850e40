"""recipes/proxy-headroom.yaml: the ablation's faithful pair differs from the paper pair in what E scores only."""

import dataclasses

from lead.config import load_params, recipe_overrides
from lead.training.presets import resolve
from tests.conftest import ROOT


def _resolved(variant: str):
    params = load_params(ROOT / "params.yaml", recipe_overrides(ROOT / "recipes" / "proxy-headroom.yaml"))
    return resolve(params.ablation.variant_train(params.train, variant, 0))


def _differences(a, b) -> dict[str, tuple]:
    out = {f"lead.{k}": (v, getattr(b.lead, k)) for k, v in vars(a.lead).items() if getattr(b.lead, k) != v}
    out.pop("lead.rules", None)
    out.update(
        {
            f"rules.{f.name}": (getattr(a.lead.rules, f.name), getattr(b.lead.rules, f.name))
            for f in dataclasses.fields(a.lead.rules)
            if getattr(a.lead.rules, f.name) != getattr(b.lead.rules, f.name)
        }
    )
    out.update({k: (v, getattr(b, k)) for k, v in vars(a).items() if k != "lead" and getattr(b, k) != v})
    return out


def test_faithful_with_the_penalty_differs_from_paper_in_the_outcome_table_and_how_a_cut_answer_is_read():
    # A cut completion scores 0 (not -1), a loop -2; a cut completion that still holds </think> and a box is graded
    # as written (the reference code never looks at the token limit). Nothing else: same L, AD, clip, lr.
    assert _differences(_resolved("lead_faithful"), _resolved("lead")) == {
        "lead.unfinished": (0.0, -1.0),
        "lead.degenerate": (-2.0, -1.0),
        "rules.truncation": ("graded", "unfinished"),
    }


def test_faithful_without_the_penalty_is_the_paper_variant_but_for_reading_a_cut_answer():
    assert _differences(_resolved("grpo_l_ad_faithful"), _resolved("grpo_l_ad")) == {
        "rules.truncation": ("graded", "unfinished"),
    }


def test_faithful_e_without_l_differs_from_plain_grpo_in_the_outcome_table_and_how_a_cut_answer_is_read():
    # Plain GRPO scores every non-correct outcome 0; E under faithful's table: wrong -1, cut 0, loop -2.
    assert _differences(_resolved("grpo_e_faithful"), _resolved("grpo")) == {
        "lead.wrong": (-1.0, 0.0),
        "lead.degenerate": (-2.0, 0.0),
        "rules.truncation": ("graded", "unfinished"),
    }
