"""Planning: goals turned into plans by an LLM.

``planner`` is the planner worker (an agent whose final tool submits a plan); ``goals`` is what
a goal asks of it: the options, the planning request, the planner node, the synthesis step,
and planning with no run (``dagwright plan``). Adding a plan to its run and re-planning a
failed branch are the orchestrator's (``orchestrator/execution/``): planning imports no run.
"""
