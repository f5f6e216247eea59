"""Communication-driven coscheduling in the agent: pure schemes (seed 002 Table 1) and weights."""
