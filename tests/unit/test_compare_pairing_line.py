"""``uep compare`` says how many items pair with the baseline and how many are on one side only."""

from uep_cli.main import pairing_line


def test_the_first_line_counts_the_paired_items():
    c = {"baseline_evaluation_id": "b", "baseline_reason": "previous", "n_paired": 1, "n_current": 20, "n_baseline": 40}
    c["n_paired_with_verdicts"] = 1
    # the 20-item run against a 40-item one sharing one item: 19 only here, 39 only in the baseline
    assert pairing_line(c) == (
        "baseline b (previous): 1 of 20 items pair (1 with verdicts on both sides); 19 only in this run, 39 only in the baseline"
    )
