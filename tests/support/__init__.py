"""What tests share: fixtures, fakes, the host's footprint, the tier rules (no tests here)."""
