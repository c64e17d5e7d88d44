"""perf maps: .NET R2R perf maps, Linux perf-PID.map, perfinfo; address → name."""
