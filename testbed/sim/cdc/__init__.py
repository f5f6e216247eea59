"""Communication-driven coscheduling in the simulator (Yu & Byun 2011; docs/simulator.md).

``program`` (what a rank executes), ``traces`` (the NPB-like kernels' recorded
message traces), ``platform`` (nodes, link, local scheduler), ``engine`` (the
discrete-event simulation driving the agents' scheme code), ``workload``
(Yu & Byun's WL1-WL6 streams) and ``run`` (one simulated run, for sweeps).
"""
