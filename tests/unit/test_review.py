"""The champion gate and the reviewer's description (pure: no MLflow)."""

from lead.core import review

CHAMP = {"aime24": {"pass_at_1": 0.30, "len_avg": 1000.0}, "math500": {"pass_at_1": 0.80, "len_avg": 500.0}}


def scores(p1, n1, p2, n2):
    return {"aime24": {"pass_at_1": p1, "len_avg": n1}, "math500": {"pass_at_1": p2, "len_avg": n2}}


def decide(candidate, champion=CHAMP, **kw):
    return review.gate(candidate, champion, pass_tolerance=0.01, length_tolerance=0.0, **kw)


def test_first_version_passes_without_a_champion():
    d = decide(scores(0.1, 9e9, 0.1, 9e9), champion=None)
    assert d.promote and d.reasons == ("no champion yet",)


def test_pass_at_1_may_drop_by_the_tolerance_only():
    assert decide(scores(0.291, 1000, 0.80, 500)).promote  # -0.009 on aime24: within 0.01
    d = decide(scores(0.285, 900, 0.85, 400))  # -0.015 on aime24
    assert not d.promote and any(r.startswith("aime24: Pass@1 0.2850 < champion 0.3000") for r in d.reasons)


def test_length_may_not_grow_on_any_benchmark():
    d = decide(scores(0.40, 900, 0.90, 501))
    assert not d.promote and any("math500: Len_avg 501.0 > champion 500.0" in r for r in d.reasons)
    looser = review.gate(scores(0.40, 900, 0.90, 501), CHAMP, pass_tolerance=0.01, length_tolerance=0.01)
    assert looser.promote


def test_other_protocol_or_missing_benchmark_is_not_comparable():
    assert not decide(scores(0.9, 1, 0.9, 1), same_protocol=False).promote
    d = decide({**scores(0.9, 1, 0.9, 1), "aime25": {"pass_at_1": 0.5, "len_avg": 10.0}})
    assert not d.promote and "aime25: the champion has no score" in d.reasons


def test_scores_round_trip_through_version_tags():
    s = scores(0.1234567, 812.5, 0.5, 400.25)
    assert review.scores_from_tags({**review.score_tags(s), "git.commit": "abc"}) == s
    assert "eval.aime24.len_avg" in review.score_tags(s)


def test_protocol_ignores_model_and_backend_only():
    base = {"model": "train", "backend": "vllm", "samples": 32, "temperature": 0.6}
    assert review.protocol_id(base) == review.protocol_id({**base, "model": "x", "backend": "auto"})
    assert review.protocol_id(base) != review.protocol_id({**base, "samples": 8})


def test_description_shows_both_sides_and_the_verdict():
    cand = scores(0.32, 900, 0.81, 450)
    text = review.description(
        candidate=cand,
        champion=CHAMP,
        champion_version="3",
        decision=decide(cand),
        protocol_text="aime24, math500; 32 samples",
        lineage={"git.commit": "abc123"},
        runs={"evaluate run": review.ui_run_link("4", "r")},
        plots={"budget_curve.png": review.artifact_file_link("r", "evaluate/budget_curve.png")},
    )
    cells = ["aime24", "0.320", "0.300", "+0.020", "900.0", "1000.0", "-100.0"]
    assert "| " + " | ".join(f"&nbsp;&nbsp;{c}&nbsp;&nbsp;" for c in cells) + " |" in text
    assert "(version 3)" in text and "gate passed" in text and "`abc123`" in text
    assert "**Runs**: [evaluate run](#/experiments/4/runs/r?workflowType=machine_learning)" in text
    assert "[budget_curve.png](get-artifact?path=evaluate%2Fbudget_curve.png&run_uuid=r)" in text
    # MLflow's UI renders GitHub-flavored markdown: an unescaped @champion would link to a GitHub user.
    assert "current \\@champion" in text and " @" not in text


def test_ui_links_are_relative_routes_of_the_mlflow_ui():
    assert review.ui_run_link("1", "ab", "evaluate/a b.png") == (
        "#/experiments/1/runs/ab/artifacts/evaluate/a%20b.png?workflowType=machine_learning"
    )
    assert review.ui_model_version_link("my model", "2") == (
        "#/models/my%20model/versions/2?workflowType=machine_learning"
    )
    assert review.escape_mentions("@a `x @b` @c\n@d e@f") == "\\@a `x @b` \\@c\n\\@d e@f"
