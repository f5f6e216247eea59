"""What the agent, the controller and the testbed share: errors, names, cgroups, connections.

Nothing here imports from ``agent``, ``controller`` or ``testbed``; they import from here.
"""
