"""``turbolock bench`` and the repository's benchmark runners: workloads, contenders and statistics
shared by both, so the figures users measure are made by the same code as the README's."""
