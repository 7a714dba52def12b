"""Planning: goals turned into plans by an LLM.

``planner`` is the planner worker (an agent whose final tool submits a plan); ``goals`` is what
a goal run does with it: the planner node, the expansion of its plan into the run, the
synthesis step, re-planning a failed branch, and planning with no run (``dagwright plan``).
"""
