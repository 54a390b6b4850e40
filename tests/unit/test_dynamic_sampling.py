"""Dynamic sampling's decisions (lead.core.dynamic_sampling) and the batch they make (lead.training.refill)."""

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

from lead.core import dynamic_sampling as ds
from lead.training import refill


@st.composite
def rounds(draw):
    processes = draw(st.integers(1, 3))
    groups = draw(st.integers(1, 4))
    sizes = [groups, *draw(st.lists(st.integers(1, groups), max_size=4))]  # refill rounds may be smaller
    flags = [
        np.array(draw(st.lists(st.booleans(), min_size=n * processes, max_size=n * processes))) for n in sizes
    ]
    return flags, processes, groups


@given(rounds())
def test_each_process_keeps_its_informative_groups_first_then_its_first_rounds_others(case):
    flags, processes, groups = case
    plan = ds.plan(flags, processes, groups)
    for proc, picks in enumerate(plan.picks):
        owned = [ds.owned(f, processes)[proc] for f in flags]
        good = [(r, i) for r, part in enumerate(owned) for i, flag in enumerate(part) if flag]
        assert len(picks) == groups and len(set(picks)) == groups  # a full batch of distinct groups
        assert plan.informative[proc] == min(len(good), groups)
        assert [p for p in picks if owned[p[0]][p[1]]] == good[
            :groups
        ]  # the informative ones, in round order
        assert all(r == 0 for r, i in picks if not owned[r][i])  # filled from the first batch only
    assert plan.full == all(d == 0 for d in ds.deficits(flags, processes, groups))


def test_the_refill_stream_is_the_seed_step_and_rounds_and_leaves_out_the_steps_own_prompts():
    a = ds.refill_indices(50, 8, seed=3, step=7, round_=1)
    assert a == ds.refill_indices(50, 8, seed=3, step=7, round_=1) and len(set(a)) == 8
    assert a != ds.refill_indices(50, 8, seed=3, step=7, round_=2)
    assert a != ds.refill_indices(50, 8, seed=3, step=8, round_=1)
    assert not set(ds.refill_indices(50, 40, seed=3, step=7, round_=1, exclude=frozenset(range(10)))) & set(
        range(10)
    )


def test_join_keeps_the_picked_rows_padded_as_trl_pads_them():
    def output(prompt_width: int, width: int, base: int) -> dict:
        rows = 4  # 2 groups of 2
        return {
            "prompt_ids": torch.arange(rows * prompt_width).reshape(rows, prompt_width) + base,
            "prompt_mask": torch.ones(rows, prompt_width, dtype=torch.long),
            "completion_ids": torch.arange(rows * width).reshape(rows, width) + base,
            "completion_mask": torch.ones(rows, width, dtype=torch.long),
            "advantages": torch.zeros(rows),
            "num_items_in_batch": torch.tensor(99),
        }

    first, second = output(2, 3, 0), output(3, 5, 100)
    joined = refill.join_outputs([first, second], [(0, 1), (1, 0)], group_size=2, pad_token_id=-1)
    assert joined["completion_ids"].shape == (4, 5) and joined["prompt_ids"].shape == (4, 3)
    assert joined["completion_ids"][0].tolist() == [6, 7, 8, -1, -1]  # round 0, row 2: right-padded
    assert joined["completion_mask"][0].tolist() == [1, 1, 1, 0, 0]
    assert joined["prompt_ids"][0].tolist() == [-1, 4, 5]  # prompts are padded on the left
    assert joined["prompt_mask"][0].tolist() == [0, 1, 1]
    assert torch.equal(joined["completion_ids"][2], second["completion_ids"][0])
    assert "num_items_in_batch" not in joined  # the caller counts it over the processes


def test_the_gathered_batch_and_the_logged_advantages_follow_the_plan():
    batch = {
        "rewards": np.array([0.0, 0.0, 1.0, -1.0]),
        "lengths": np.array([1, 2, 3, 4]),
    }  # 2 processes x 1 group
    more = {"rewards": np.array([1.0, 0.0, 0.0, 0.0]), "lengths": np.array([5, 6, 7, 8])}
    plan = ds.plan([np.array([False, True]), np.array([True, False])], processes=2, batch_groups=1)
    assert plan.picks == [[(1, 0)], [(0, 0)]]
    gathered = refill.gathered_batch([batch, more], plan, group_size=2, processes=2)
    assert gathered["lengths"].tolist() == [5, 6, 3, 4]  # process 0's group, then process 1's
    logged = refill.logged_advantages([batch, more], plan, np.array([0.5, -0.5, 0.7, -0.7]), 2, 2)
    assert np.isnan(logged[:2]).all() and logged[2:4] == [0.7, -0.7] and logged[4:6] == [0.5, -0.5]
    assert np.isnan(logged[6:]).all()
