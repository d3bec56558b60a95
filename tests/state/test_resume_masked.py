"""The count cache and a mask state (tests/state/test_resume.py's property): ``run --strategy mask`` from the
command line (streamed: pass 1 from the last call's resume point, the masking made in pass 2, the state's
masking applied again a record at a time) gives what the held route gives from scratch, whatever the
appends."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_resume import LINES, _sequence


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(min_value=1, max_value=len(LINES)), min_size=1, max_size=4),
       exact_opt=st.sampled_from(["tiktoken", "none"]), window=st.sampled_from([400_000, 30_000, 12_000]),
       keep=st.sampled_from([0, 3]))
def test_any_split_of_appends_with_a_mask_state_gives_the_held_answer(tmp_path, cuts, exact_opt, window,
                                                                     keep):
    cuts = sorted(set(cuts))
    kw = {"exact": exact_opt, "window": window, "strategy": "mask", "keep_results": keep}
    streamed = _sequence(tmp_path, LINES, cuts, cold=False, hold=False, **kw)
    held = _sequence(tmp_path, LINES, cuts, cold=True, **kw)
    assert streamed == held
