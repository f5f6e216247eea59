"""Small study specs for the study tests."""

from __future__ import annotations

DHC_SPEC = """
[dhc]
name = "dhc-tiny"
pes = 8
gangs = 150
loads = [0.3]
point_loads = [0.515]
waste_pes = [32]
waste_rounds = 300
waste_table_pes = 64
workers = 1
"""
