"""The reward tests run on a shared, busy 2-core machine, where starting one math-equivalence child
(importing sympy and math-verify) has taken up to 20 s; the production start-up allowance (10 s, see
``verl_ext.rewards.math_settings``) would make every test that expects a symbolic check right after a
cold start flaky. So this folder's tests run with a 120 s allowance; the tests of the latency bound
configure their own small allowance explicitly."""

import os

from verl_ext.rewards.math_settings import STARTUP_ENV

os.environ.setdefault(STARTUP_ENV, "120")
