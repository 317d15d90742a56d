"""The parts of the scheduler benchmark: the simulated world (code, subagents, a rate-limited provider, the lower
bound), the simulated host (rolling or whole waves, following what it is told), and the strategies it compares."""
