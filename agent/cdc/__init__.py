"""Communication-driven coscheduling in the agent: pure schemes (Yu & Byun 2011 Table 1) and
weights."""
